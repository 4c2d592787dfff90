"""The one transaction door: a write waits out a held SQLite write lock instead of failing."""

from __future__ import annotations

import ast
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from stepup_helpers import job_step_up

from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.store import engine as engine_module
from webplatform.store import session_scope
from webplatform.store.models import JobState, Surface

HOLD_S = 1.0


def _hold_write_lock(db: Path, held: threading.Event, seconds: float) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_approve_succeeds_once_a_held_write_lock_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's own wait (busy_timeout) is made shorter than the hold, so only the door's
    # retry can carry the approval through.
    monkeypatch.setattr(engine_module, "BUSY_TIMEOUT_MS", 100)
    settings = Settings(home=tmp_path / "aat-home")
    platform = Platform(settings)
    answer = request_run(
        platform=platform,
        call=RunCall(
            kind="tool",
            name="outbox",
            action="send-message",
            args={"to": "ops@example.org", "subject": "report", "body": "hello"},
        ),
        actor=Actor(surface=Surface.mcp_stdio, client="test-agent"),
        consent=Consent.QUEUE,
    )
    assert answer.job is not None
    job_id = answer.job
    pending = platform.transact(lambda s: jobs.get_job(session=s, job_id=job_id), write=False)
    assert pending is not None

    held = threading.Event()
    holder = threading.Thread(
        target=_hold_write_lock, args=(settings.home / "aat.db", held, HOLD_S)
    )
    holder.start()
    try:
        assert held.wait(5)
        # The lock is real: a write that does not go through the door fails outright.
        with (
            pytest.raises(OperationalError, match="locked"),
            session_scope(platform.engine) as session,
        ):
            session.connection()  # BEGIN IMMEDIATE
        started = time.monotonic()
        job = decisions.approve(
            platform=platform,
            job_id=job_id,
            operator="ada",
            digest=pending.args_digest,
            address="127.0.0.1",
            step_up=job_step_up(platform, job_id, "ada"),
        )
        waited = time.monotonic() - started
    finally:
        holder.join()
    assert job.state == JobState.approved
    assert waited >= HOLD_S * 0.5, "approve did not wait for the lock at all"


# The only code that may open a session or a transaction itself: the store, and the door.
_DOOR_KEEPERS = ("webplatform/store/", "webplatform/platform.py")
_OPENERS = {"transact", "session_scope"}
_ORM = ("sqlmodel", "sqlalchemy", "sqlalchemy.orm")


def _door_bypasses(path: Path, source: str) -> list[str]:
    """Where `source` opens a session or transaction but through `Platform.transact`: the
    store's `transact`/`session_scope` imported or called, an ORM `Session(...)` or
    `sessionmaker(...)` built, or `engine.connect()` / `engine.begin()` called."""
    tree = ast.parse(source)
    orm = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in _ORM
        for alias in node.names
        if alias.name in ("Session", "sessionmaker")
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("webplatform.store"):
            names = sorted(a.name for a in node.names if a.name in _OPENERS | {"engine"})
            found += [f"{path}:{node.lineno} imports {name}" for name in names]
        if not isinstance(node, ast.Call):
            continue
        func, owner = node.func, ""
        if isinstance(func, ast.Attribute):
            owner = ast.unparse(func.value).rsplit(".", 1)[-1]
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if (
            (name in orm and not owner)
            or (name in _OPENERS and owner != "platform")
            or (name in ("connect", "begin") and owner == "engine")
        ):
            found.append(f"{path}:{node.lineno} calls {ast.unparse(func)}")
    return found


def test_only_platform_transact_opens_a_session_outside_the_store() -> None:
    """Every transaction outside `webplatform/store` goes through `Platform.transact` (the
    retrying door): no `session_scope`, `transact(engine, ...)`, `Session(...)`, nor a
    connection of its own, in the platform or the dashboard."""
    root = Path(__file__).resolve().parents[1]
    paths = sorted([*root.glob("webplatform/**/*.py"), *root.glob("dashboard/**/*.py")])
    bypasses = [
        problem
        for path in paths
        if not str(path.relative_to(root)).startswith(_DOOR_KEEPERS)
        for problem in _door_bypasses(path.relative_to(root), path.read_text())
    ]
    assert bypasses == [], "use Platform.transact:\n" + "\n".join(bypasses)


# SQL is built only in the store: these names, imported from sqlmodel or sqlalchemy, build
# statements or expressions (`Session`, `Engine` and the like are types, and may be named).
_SQL_BUILDERS = {"select", "update", "delete", "insert", "text", "func", "col", "and_", "or_"}
_SQL_PACKAGES = ("sqlmodel", "sqlalchemy")


# Calls that open a transaction of their own: outside the store, a transaction is a store
# object's method (a named query) or a step a layer above decides, run through a store
# object's one door for it (`platform.jobs.step(fn)`, `platform.rules.step(fn)`, ...).
_DOORS = {"transact", "_transact"}


def _store_bypasses(path: Path, source: str) -> list[str]:
    """Where `source` does the store's work itself: a transaction composed through
    `Platform.transact` (with a lambda or a named function) instead of a store object's method
    or its `step` door, a `step(lambda ...)` (a query with no name), or SQL built from
    sqlmodel's or sqlalchemy's statement and expression builders."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{path}:{node.lineno} imports {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] in _SQL_PACKAGES
            ]
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_SQL_PACKAGES):
            names = sorted(a.name for a in node.names if a.name in _SQL_BUILDERS)
            found += [f"{path}:{node.lineno} imports {name} from {node.module}" for name in names]
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name in _DOORS:
            found.append(f"{path}:{node.lineno} calls {ast.unparse(node.func)}(...)")
        if name == "step" and isinstance(node.args[0], ast.Lambda):
            found.append(f"{path}:{node.lineno} calls {ast.unparse(node.func)}(lambda ...)")
    return found


def test_store_bypass_check_finds_a_lambda_and_a_select() -> None:
    """The check below sees what it forbids (so its empty answer means something)."""
    source = (
        "from sqlmodel import Session, select\n"
        "import sqlalchemy\n"
        "rows = platform.transact(lambda s: s.exec(select(Job)).all(), write=False)\n"
        "job = platform.jobs.get(1)\n"
        "done = platform.transact(apply)\n"
        "moved = platform.jobs.step(apply, write=False)\n"
        "read = platform.jobs.step(lambda session: None)\n"
    )
    assert _store_bypasses(Path("x.py"), source) == [
        "x.py:1 imports select from sqlmodel",
        "x.py:2 imports sqlalchemy",
        "x.py:3 calls platform.transact(...)",
        "x.py:5 calls platform.transact(...)",
        "x.py:7 calls platform.jobs.step(lambda ...)",
    ]


def test_no_sql_nor_transact_outside_the_store() -> None:
    """Queries live in `webplatform/store` and are reached through its store objects
    (`platform.jobs`, `platform.operators`, ...): no module of the platform or the dashboard
    outside the store builds SQL or calls `Platform.transact` itself; a transaction a layer
    above composes (an edit, a rule's take) goes through a store object's `step` door."""
    root = Path(__file__).resolve().parents[1]
    paths = sorted([*root.glob("webplatform/**/*.py"), *root.glob("dashboard/**/*.py")])
    bypasses = [
        problem
        for path in paths
        if not str(path.relative_to(root)).startswith(_DOOR_KEEPERS)
        for problem in _store_bypasses(path.relative_to(root), path.read_text())
    ]
    assert bypasses == [], "use a store object's method:\n" + "\n".join(bypasses)
