"""One process's handle on the platform (settings, database, registry) and who asks for a run."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from webplatform.config import Settings
from webplatform.registry import RegistryLoader
from webplatform.registry.model import Registry
from webplatform.store.engine import make_engine, session_scope
from webplatform.store.models import Surface


@dataclass(frozen=True)
class Actor:
    """Who asks for a run: the surface, the MCP client's name, the operator, their address."""

    surface: Surface
    client: str | None = None
    operator: str | None = None
    address: str | None = None
    # The caller's working directory, so tools can resolve relative paths the caller gave.
    cwd: Path | None = None

    @property
    def name(self) -> str:
        """The name shown in history and audit events."""
        return self.operator or self.client or self.surface.value


class Platform:
    """One process's handle on settings, database and registry, built once and passed around."""

    def __init__(self, settings: Settings, *, engine: Engine | None = None) -> None:
        self.settings = settings
        self.engine = engine or make_engine(settings)
        self.loader = RegistryLoader(settings.registry_roots)
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def registry(self) -> Registry:
        """The registry as it is on disk now (cached on modification times)."""
        return self.loader.load()

    @contextmanager
    def session(self, *, write: bool = True) -> Iterator[Session]:
        """A database session that commits on success and rolls back on error.

        `write=False` for reads: on SQLite it does not queue behind the write lock.
        """
        with session_scope(self.engine, write=write) as session:
            yield session
