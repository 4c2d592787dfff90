"""One process's handle on the platform (settings, database, registry) and who asks for a run."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from webplatform.config import DatabaseUnreachable, Settings
from webplatform.process import server_pool
from webplatform.registry import RegistryLoader
from webplatform.registry.limits import ceilings
from webplatform.registry.model import Registry
from webplatform.registry.servers import ServerLoader, compose, definition_digest, pinned_definition
from webplatform.store.adoption import Adoption
from webplatform.store.agents import Tokens
from webplatform.store.engine import make_engine, transact
from webplatform.store.jobs import Heartbeats, Jobs, Leases
from webplatform.store.models import LOGIN_PROOF, TOKEN_PROOF, Surface
from webplatform.store.oauth import SignIns
from webplatform.store.operators import Operators, RoleBook
from webplatform.store.passkeys import Passkeys
from webplatform.store.readiness import readiness_problem
from webplatform.store.rules import Rules
from webplatform.store.seals import RowSeal
from webplatform.store.servers import ServerPins
from webplatform.store.sessions import Sessions
from webplatform.store.trail import Audit

T = TypeVar("T")

# How a process makes its seal on authority rows. The decision key it is made from lives a
# floor above (`webplatform.trust.authority` installs its `seal_for` here when imported).
_sealer: Callable[[Platform], RowSeal] | None = None


def install_sealer(sealer: Callable[[Platform], RowSeal]) -> None:
    """Make `sealer(platform)` the seal every platform's store objects sign and check with."""
    global _sealer
    _sealer = sealer


# The roles operator rows may hold, as trust's table of permissions names them; installed
# beside the sealer (`webplatform.trust.authority`), for the same reason.
_roles: RoleBook | None = None


def install_roles(book: RoleBook) -> None:
    """Make `book` the roles every platform's operators are given and changed to."""
    global _roles
    _roles = book


@dataclass(frozen=True)
class Actor:
    """Who asks for a run: the surface, the MCP client's name, the operator, their address.

    `agent` is the name of the agent token the request carried (vouched for by the server);
    `client` is whatever name the MCP client gave itself (self-reported, never trusted).
    """

    surface: Surface
    client: str | None = None
    operator: str | None = None
    agent: str | None = None
    address: str | None = None
    # The caller's working directory, so tools can resolve relative paths the caller gave.
    cwd: Path | None = None

    @property
    def name(self) -> str:
        """The name shown in history and audit events."""
        return self.operator or self.agent or self.client or self.surface.value

    @property
    def proof(self) -> str | None:
        """What vouches for `name`: "login" (a signed-in operator), "token" (an agent
        token), or None (the client's own word: shown as self-reported, SPEC §19)."""
        if self.operator:
            return LOGIN_PROOF
        return TOKEN_PROOF if self.agent else None


# A long-running process waiting for its database server asks again this often at most.
_MAX_DB_WAIT_S = 10.0


class Platform:
    """One process's handle on settings, database and registry, built once and passed around."""

    @classmethod
    def when_reachable(cls, settings: Settings, say: Callable[[str], None]) -> Platform:
        """The platform, once its database server answers: a long-running process that
        starts before its database says so once (`say`, one line) and asks again with a
        backoff, rather than exiting with a traceback."""
        delay = 0.5
        told = False
        while True:
            try:
                return cls(settings)
            except DatabaseUnreachable as exc:
                if not told:
                    say(f"{exc}; trying again until it answers")
                    told = True
            time.sleep(delay)
            delay = min(delay * 2, _MAX_DB_WAIT_S)

    def __init__(self, settings: Settings, *, engine: Engine | None = None) -> None:
        self.settings = settings
        self.engine = engine or make_engine(settings)
        self.loader = RegistryLoader(
            settings.registry_roots,
            watch=settings.watch_registry,
            cache_dir=settings.home / "cache",
            ceilings=ceilings(settings),
        )
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # The store objects, one per aggregate: each owns its queries, holds the door and
        # asks for the seal only when it reads or writes a sealed row.
        self.jobs = Jobs(self.transact, self.seal)
        self.leases = Leases(self.transact, self.seal)
        self.heartbeats = Heartbeats(self.transact, self.seal)
        self.operators = Operators(self.transact, self.seal, self.roles)
        self.tokens = Tokens(self.transact, self.seal)
        self.rules = Rules(self.transact, self.seal)
        self.sign_ins = SignIns(self.transact, self.seal)
        self.passkeys = Passkeys(self.transact, self.seal)
        self.sessions = Sessions(self.transact, self.seal)
        self.audit = Audit(self.transact, self.seal)
        self.adoption = Adoption(self.transact, self.seal)
        self.server_pins = ServerPins(self.transact, self.seal)
        self.server_loader = ServerLoader(settings.registry_roots)
        server_pool.configure(settings.server_idle_s)
        self._composed: tuple[object, Registry] | None = None
        self._recorded_generation = -1

    def registry(self) -> Registry:
        """The registry as it is on disk now (cached on modification times), with the
        upstream MCP servers' accepted tools as tools of their own (SPEC §22)."""
        base = self.loader.load()
        found = self.server_loader.load()
        if not found[0] and not found[1]:
            return base
        self.record_listings()
        stamp = self.server_pins.stamp()
        key = (id(base), id(found), stamp)
        composed = self._composed
        if composed is not None and composed[0] == key:
            return composed[1]
        seen = self.server_pins.pins()
        registry = compose(base, found, seen.accepted, seen.held)
        self._composed = (key, registry)
        return registry

    def record_listings(self) -> None:
        """Record, held, every tool definition this process's servers listed that the store
        has not seen (new tools, changed definitions)."""
        pool = server_pool.POOL
        if pool.generation == self._recorded_generation:
            return
        generation, listed = pool.generation, dict(pool.listed)
        for server, tools in listed.items():
            self.record_seen(server, tools)
        self._recorded_generation = generation

    def record_seen(self, server: str, tools: dict[str, dict[str, Any]]) -> list[str]:
        """Record `server`'s listed `tools` (held when new or changed); the tools held."""
        seen = [(definition_digest(d), d) for d in map(pinned_definition, tools.values())]
        return self.server_pins.record_seen(server, seen)

    def seal(self) -> RowSeal:
        """This process's seal on authority rows (`webplatform.trust.authority.seal_for`)."""
        if _sealer is None:
            raise RuntimeError("no seal: webplatform.trust.authority was never imported")
        return _sealer(self)

    def readiness_problem(self) -> str | None:
        """What keeps this process from serving requests now, in one line, or None when ready
        (`webplatform.store.readiness`); a database that does not answer raises."""
        return self.transact(readiness_problem, write=False)

    def roles(self) -> RoleBook:
        """The roles operators may hold (`webplatform.trust.permissions.ROLE_BOOK`)."""
        if _roles is None:
            raise RuntimeError("no roles: webplatform.trust.authority was never imported")
        return _roles

    def transact(self, fn: Callable[[Session], T], *, write: bool = True) -> T:
        """The one door to the database: run `fn(session)` in one transaction and return
        its result, retrying a locked SQLite database with a bounded backoff.

        `fn` may run more than once, so it must only touch the database. `write=False` for
        reads: on SQLite it does not queue behind the write lock.
        """
        return transact(self.engine, fn, write=write)
