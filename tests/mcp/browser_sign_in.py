"""The browser's part of an agent CLI's sign-in to aat (SPEC §18), for the real-client tests.

The CLI prints or opens an authorization URL and listens on a loopback port for the answer.
Here an HTTP client plays the browser of operator alice: it logs in, opens the URL, reads
aat's page (which client, where the answer goes), allows the agent with her password as the
step-up, and follows the redirect to the CLI's listener, as the browser would.

Also the CLIs' sides: `Printing`, a command whose output the test waits on (Codex's
`mcp login` prints the URL), and `Terminal`, a terminal UI in tmux (Gemini CLI's `/mcp auth`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
from agent_seat import Seat

OPERATOR, PASSWORD = "alice", "correct horse battery"


def aat_sign_in_config(seat: Seat, client: str, url: str) -> str:
    """What `aat config CLIENT --url URL --sign-in` prints: the block without any token."""
    done = subprocess.run(
        [sys.executable, "-m", "webplatform", "config", client, "--url", url, "--sign-in"],
        env=seat.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


class Printing:
    """A CLI whose output is read as it comes (a thread keeps it), for a test to wait on."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,  # kept open: the CLI may read an answer from it
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.out = ""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.out += line

    def __enter__(self) -> Printing:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)

    def wait_for(self, pattern: str, timeout_s: float = 60) -> str:
        """The first match of `pattern` in the output, once it is there."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                found = re.search(pattern, self.out)
            if found:
                return found.group(0)
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"never printed {pattern!r}:\n{self.out}")
            time.sleep(0.1)

    def wait(self, timeout_s: float) -> int:
        """The exit status, once the CLI ends (its output all read)."""
        status = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=10)
        return status


def add_operator(seat: Seat) -> None:
    """`aat operator add alice` on the seat's aat home, as a user would."""
    subprocess.run(
        [sys.executable, "-m", "webplatform", "operator", "add", OPERATOR, "--password-stdin"],
        input=PASSWORD + "\n",
        text=True,
        env=seat.env,
        check=True,
        capture_output=True,
        timeout=60,
    )


@dataclass
class Allowed:
    """What the browser saw: aat's page, the redirect to the client, the client's answer."""

    page: str
    redirect: str
    callback: httpx.Response

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.redirect).query)


def allow_sign_in(url: str, authorize_url: str, agent: str) -> Allowed:
    """Log in as alice, open `authorize_url`, allow `agent` with the password step-up, and
    follow the redirect to the client's loopback listener."""
    with httpx.Client(base_url=url, headers={"Origin": url}, timeout=30) as browser:
        form = {"username": OPERATOR, "password": PASSWORD, "next": "/"}
        assert browser.post("/login", data=form).status_code == 303
        sent = browser.get(authorize_url)
        assert sent.status_code == 302, sent.text[:2000]
        consent = sent.headers["location"]
        page = browser.get(consent)
        assert page.status_code == 200, page.text[:2000]
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
        assert token is not None
        request = parse_qs(urlsplit(consent).query)["request"][0]
        answer = {"csrf_token": token.group(1), "request": request, "agent": agent}
        answer |= {"password": PASSWORD, "answer": "allow"}
        allowed = browser.post("/agents/connect", data=answer)
        assert allowed.status_code == 303, allowed.text[:2000]
    redirect = allowed.headers["location"]
    return Allowed(page=page.text, redirect=redirect, callback=httpx.get(redirect, timeout=30))


def mcp_status(url: str, token: str) -> int:
    """What `/mcp` answers an initialize sent with `token`."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "check", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    return httpx.post(f"{url}/mcp", json=init, headers=headers, timeout=30).status_code


def _ci_variable(name: str) -> bool:
    return name in ("CI", "CONTINUOUS_INTEGRATION") or name.startswith("CI_")


class Terminal:
    """A terminal UI in a tmux session on a private socket, read and typed into as a user
    would."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="aat-tmux-"))  # short: a socket path
        self.socket = str(self.folder / "s")
        # A person at a terminal, not a CI job: clients that see `CI` (Gemini CLI does) refuse
        # their interactive UI and exit asking for a prompt on stdin.
        env = {k: v for k, v in env.items() if not _ci_variable(k)}
        # The tmux server started here gives the session this environment.
        # The pane stays when the program exits, so a client that quits shows why on its
        # screen instead of taking the tmux server (and the test's view of it) with it.
        self.tmux(
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "50",
            "-c",
            str(cwd),
            "--",
            *argv,
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            env=env,
        )

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args], env=env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr}"
        return done.stdout

    def text(self) -> str:
        """What the screen shows now (with the lines scrolled off it), blank lines left out."""
        shown = self.tmux("capture-pane", "-p", "-S", "-200")
        return "\n".join(line.rstrip() for line in shown.splitlines() if line.strip())

    def wait_for(self, pattern: str, timeout_s: float = 60) -> str:
        """The screen, once it shows `pattern` (a regular expression)."""
        deadline = time.monotonic() + timeout_s
        while not re.search(pattern, shown := self.text()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never showed {pattern!r}:\n{shown}")
            time.sleep(0.2)
        return shown

    def type(self, text: str) -> None:
        """Type `text` and press Enter."""
        self.tmux("send-keys", "-l", text)
        time.sleep(0.3)  # let the input box take the text before Enter submits it
        self.tmux("send-keys", "Enter")

    def submit(self, text: str, *, started: str, attempts: int = 3) -> str:
        """Type `text` and press Enter until the screen shows `started` (a TUI busy with
        something else, or with a completion menu open, may take an Enter for itself)."""
        self.tmux("send-keys", "-l", text)
        for _ in range(attempts):
            time.sleep(0.5)  # let the input box take the text before Enter submits it
            self.tmux("send-keys", "Enter")
            try:
                return self.wait_for(started, timeout_s=10)
            except AssertionError:
                continue
        return self.wait_for(started, timeout_s=1)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)
