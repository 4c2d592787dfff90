"""Login throttling against a real `aat serve`: a concurrent burst, and forged client addresses."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serving import aat_env, aat_serve, free_port
from sqlalchemy import text

from webplatform.config import Settings
from webplatform.platform import Platform

OPERATOR, PASSWORD = "alice", "correct horse battery"
BURST = 40
pytestmark = pytest.mark.slow
FORGED = "203.0.113.9"


def _env(home: Path, port: int, **extra: str) -> dict[str, str]:
    return aat_env(home, AAT_DASHBOARD_URL=f"http://127.0.0.1:{port}", **extra)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[str, Path, int]]:
    """An AAT_HOME with operator alice, and a free port: (tmp folder, home, port)."""
    home, port = tmp_path / "home", free_port()
    subprocess.run(
        [sys.executable, "-m", "webplatform", "operator", "add", OPERATOR, "--password-stdin"],
        input=PASSWORD + "\n",
        text=True,
        env=_env(home, port),
        check=True,
        capture_output=True,
    )
    yield str(tmp_path), home, port


def _login(url: str, password: str, *, forwarded: str | None = None) -> int:
    headers = {"Origin": url}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded
    r = httpx.post(
        f"{url}/login",
        data={"username": OPERATOR, "password": password, "next": "/"},
        headers=headers,
        timeout=30,
    )
    return r.status_code


def _events(home: Path, event: str) -> list[str | None]:
    platform = Platform(Settings(home=home))
    with platform.engine.connect() as conn:
        rows = conn.execute(text("SELECT address FROM audit_event WHERE event = :e"), {"e": event})
        return [row[0] for row in rows]


def test_a_concurrent_burst_of_guesses_gets_five_checks_and_no_login(
    serve: tuple[str, Path, int],
) -> None:
    tmp, home, port = serve
    statuses: list[int] = []
    start = threading.Barrier(BURST)

    def guess(i: int) -> None:
        start.wait()
        # All wrong: which five threads get checked is the scheduler's choice, so the right
        # password comes after the burst, where the measured attack got in.
        statuses.append(_login(url, f"wrong-{i}"))

    with aat_serve(env=_env(home, port), port=port, log=Path(tmp) / "serve.log") as url:
        threads = [threading.Thread(target=guess, args=(i,)) for i in range(BURST)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        checked = [s for s in statuses if s != 429]
        assert len(statuses) == BURST
        assert len(checked) <= 5, f"{len(checked)} guesses were checked against a limit of 5"
        # Right after the burst even the right password waits.
        assert _login(url, PASSWORD) == 429
    assert len(_events(home, "login-failed")) + len(_events(home, "login")) <= 5


def test_x_forwarded_for_is_ignored_unless_the_proxy_is_trusted(
    serve: tuple[str, Path, int],
) -> None:
    tmp, home, port = serve
    with aat_serve(env=_env(home, port), port=port, log=Path(tmp) / "serve.log") as url:
        assert _login(url, "wrong", forwarded=FORGED) == 401
    assert _events(home, "login-failed") == ["127.0.0.1"]
    trusted = _env(home, port, AAT_TRUSTED_PROXIES="127.0.0.1")
    with aat_serve(env=trusted, port=port, log=Path(tmp) / "serve2.log") as url:
        assert _login(url, PASSWORD, forwarded=FORGED) == 303
    assert _events(home, "login") == [FORGED]
