"""A throwaway PostgreSQL server for the test session, when AAT_TEST_PG_URL is not set.

`.ci/run` starts one and exports AAT_TEST_PG_URL; by hand, `make test` finds the server
binaries under /usr/lib/postgresql/*/bin and starts its own in a temporary folder, as the
`postgres` user when run as root (PostgreSQL refuses to run as root). Under pytest-xdist the
first worker that needs it starts it and the others reuse it (tests/conftest.py).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HOW_TO = (
    "PostgreSQL tests need a server: run .ci/run (it starts PostgreSQL 15 and exports "
    "AAT_TEST_PG_URL), set AAT_TEST_PG_URL=postgresql+psycopg://USER@HOST:PORT/DB yourself, "
    "or install the server binaries (apt-get install postgresql) so the tests start their own"
)


# Waits for the test session's pid to go, then stops the server (SIGQUIT to the postmaster
# is an immediate shutdown) and removes its folder.
WATCHDOG = (
    'while kill -0 "$1" 2>/dev/null; do sleep 1; done; '
    'pid=$(head -n 1 "$2/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid"; '
    'sleep 2; rm -rf "$2"'
)


def server_bin() -> Path | None:
    """The newest PostgreSQL server bin folder installed here, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    return Path(found[-1]).parent if found else None


def _version(path: str) -> tuple[int, ...]:
    part = Path(path).parent.parent.name
    return tuple(int(p) for p in part.split(".") if p.isdigit())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A running throwaway server: its URL, and how to stop it and remove its folder."""

    url: str
    folder: Path
    bin_dir: Path
    user: str | None
    watchdog: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.watchdog.kill()
        self.watchdog.wait()
        subprocess.run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate",
             "stop"],
            user=self.user,
            cwd=self.folder,
            capture_output=True,
            check=False,
            timeout=60,
        )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)


def start_server(*, owner_pid: int) -> Server:
    """Start a PostgreSQL server on a free loopback port that stops when `owner_pid` exits.

    `owner_pid` is this process for a plain session, or the pytest-xdist controller when
    the workers share one server (tests/conftest.py).
    """
    bin_dir = server_bin()
    if bin_dir is None:
        raise RuntimeError(HOW_TO)
    user = "postgres" if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="aat-test-pg."))
    if user:
        shutil.chown(folder, user)
    data, port = folder / "data", _free_port()

    def run(*argv: str) -> None:
        subprocess.run(argv, check=True, user=user, cwd=folder, capture_output=True, timeout=120)

    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", "aat", "--auth=trust", "-E", "UTF8")
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} "
            "-c max_connections=200 -c fsync=off -c synchronous_commit=off"
        )
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-o",
            options, "start")  # fmt: skip
        run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "aat", "aat_test")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log = folder / "log"
        detail = getattr(exc, "stderr", b"") or b""
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(
            f"could not start a throwaway PostgreSQL: {exc}\n{detail.decode(errors='replace')}"
            f"\n{tail}\n{HOW_TO}"
        ) from exc
    # If the owner is killed before its teardown, the server must not outlive it.
    watchdog = subprocess.Popen(
        ["/bin/sh", "-c", WATCHDOG, "aat-pg-watchdog", str(owner_pid), str(folder)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"postgresql+psycopg://aat@127.0.0.1:{port}/aat_test"
    return Server(url=url, folder=folder, bin_dir=bin_dir, user=user, watchdog=watchdog)


@contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a PostgreSQL server on a free loopback port; yield its SQLAlchemy URL."""
    server = start_server(owner_pid=os.getpid())
    try:
        yield server.url
    finally:
        server.stop()
