"""Issue 10's acceptance test: the service-account deployment holds against an agent with a
shell of its own (SPEC §10).

Run as root (as CI does), it creates two system users: a service user that owns `AAT_HOME`
(0700) and runs `aat serve`, and an agent user. aat is a wheel installed into a venv on the
system Python (an interpreter under /root cannot be run by another user), in a folder under
/tmp both users can read; the venv borrows its dependencies from the dev venv with a `.pth`
line, as tests/test_packaging.py does. As the agent user: the database cannot be read, no
operator can be added, and `aat mcp --url` with an agent token, spawned by the SDK's stdio
client, lists the tools, runs `hello-world` and queues `outbox send-message`; an operator
approves it in Chromium, and the agent then sees `succeeded` with exactly one message in the
service account's outbox.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import pytest
from mcp import Client, StdioServerParameters
from playwright.sync_api import expect, sync_playwright
from serving import aat_serve, free_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,  # builds a wheel
    pytest.mark.browser,  # the approval is given in Chromium
    pytest.mark.anyio,
    pytest.mark.timeout(400),
]

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
CHROMIUM = "/usr/bin/chromium"
OPERATOR, PASSWORD = "alice", "correct horse battery"
MESSAGE = {"to": "ops@example.org", "subject": "from the agent", "body": "hello"}


@pytest.fixture
def anyio_backend() -> str:
    """The SDK runs on asyncio here."""
    return "asyncio"


@dataclass(frozen=True)
class Install:
    """aat installed where every user can run it, and a clean environment to run it in."""

    root: Path
    aat: Path
    python: Path
    env: dict[str, str]


@dataclass(frozen=True)
class User:
    """A system user made for this test."""

    name: str
    uid: int
    gid: int

    def command(self, *argv: str | Path) -> list[str]:
        """`argv` run as this user (no shell, no intermediate process: setpriv execs)."""
        ids = [f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups"]
        return ["setpriv", *ids, "--", *map(str, argv)]


@pytest.fixture
def install() -> Iterator[Install]:
    """A wheel built from the checkout, installed into a new venv on the system Python, in a
    0755 folder under /tmp (pytest's own tmp folders are 0700, closed to other users)."""
    if os.geteuid() != 0:
        pytest.fail("this test creates OS users: run it as root (CI does)")
    root = Path(tempfile.mkdtemp(prefix="aat-crossuser-", dir="/tmp"))
    try:
        root.chmod(0o755)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
            + ["-w", str(root / "dist"), str(ROOT)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        (wheel,) = (root / "dist").glob("aat-*.whl")
        venv = root / "venv"
        subprocess.run(
            [SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
        )
        (site,) = venv.glob("lib/python*/site-packages")
        (site / "_dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AAT_", "VIRTUAL_ENV"))}
        env.pop("PYTHONPATH", None)
        env["PYTHONUNBUFFERED"] = "1"
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps"]
            + ["--no-build-isolation", "--ignore-installed", str(wheel)],
            check=True,
            capture_output=True,
            env=env,
            cwd=root,
            timeout=300,
        )
        subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
        yield Install(root=root, aat=venv / "bin" / "aat", python=venv / "bin" / "python", env=env)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def users() -> Iterator[tuple[User, User]]:
    """(service user, agent user): new system users, removed afterwards."""
    made: list[User] = []
    try:
        for role in ("svc", "agent"):
            name = f"aat-{role}-{uuid.uuid4().hex[:6]}"
            subprocess.run(["useradd", "--system", name], check=True, capture_output=True)
            entry = pwd.getpwnam(name)
            made.append(User(name=name, uid=entry.pw_uid, gid=entry.pw_gid))
        yield made[0], made[1]
    finally:
        for user in made:
            gone = subprocess.run(["userdel", user.name], capture_output=True, text=True)
            assert gone.returncode == 0, f"userdel {user.name}: {gone.stderr}"


def run_as(
    user: User, install: Install, *argv: str | Path, env: dict[str, str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        user.command(*argv),
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        cwd=install.root,
        timeout=60,
    )


def approve_in_chromium(url: str, job_id: int) -> None:
    """Log in as the operator, and approve job `job_id` with the password step-up."""
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.goto(f"{url}/approvals")
            page.fill("input[name=username]", OPERATOR)
            page.fill("input[name=password]", PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(f"{url}/approvals")
            card = page.locator(f'article.card[data-job-id="{job_id}"]')
            expect(card).to_contain_text("outbox send-message")
            expect(card).to_contain_text("from the agent")
            card.locator(".approve-form input[name=password]").fill(PASSWORD)
            card.get_by_role("button", name="Approve", exact=True).click()
            expect(page.locator("#notice")).to_contain_text(f"Approved job {job_id}.")
        finally:
            browser.close()


async def test_an_agent_user_reaches_aat_only_through_mcp_and_a_human_approval(
    install: Install, users: tuple[User, User]
) -> None:
    svc, agent = users
    home = install.root / "var-lib-aat"
    home.mkdir(mode=0o700)
    os.chown(home, svc.uid, svc.gid)
    port = free_port()
    server_env = {
        **install.env,
        "AAT_HOME": str(home),
        "HOME": str(home),
        "AAT_DASHBOARD_URL": f"http://127.0.0.1:{port}",
        "AAT_APPROVAL_WAIT_S": "2",
        "AAT_HEARTBEAT_S": "0.5",
    }
    added = run_as(
        svc, install, install.aat, "operator", "add", OPERATOR, "--password-stdin",
        env=server_env, stdin=PASSWORD + "\n",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    minted = run_as(svc, install, install.aat, "agent", "add", "build-bot", env=server_env)
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    database = home / "aat.db"
    assert database.is_file() and (home.stat().st_mode & 0o777) == 0o700

    # The agent user's environment: it knows where AAT_HOME is, and that does not help it.
    agent_work = install.root / "agent-work"
    agent_work.mkdir()
    os.chown(agent_work, agent.uid, agent.gid)
    agent_env = {**install.env, "AAT_HOME": str(home), "HOME": str(agent_work)}
    read = run_as(
        agent, install, install.python, "-c", f"open({str(database)!r}, 'rb').read()",
        env=agent_env,
    )  # fmt: skip
    assert read.returncode == 1 and "PermissionError" in read.stderr, read.stderr
    intruder = run_as(
        agent, install, install.aat, "operator", "add", "mallory", "--password-stdin",
        env=agent_env, stdin="mallory's password\n",
    )  # fmt: skip
    assert intruder.returncode == 1 and intruder.stdout == "", intruder.stdout
    line = intruder.stderr.strip()
    assert "\n" not in line and f"cannot open AAT_HOME {home}: permission denied" in line, line

    log = install.root / "serve.log"
    with aat_serve(
        env=server_env,
        port=port,
        log=log,
        command=svc.command(install.aat),
        cwd=home,
    ) as url:
        params = StdioServerParameters(
            command=agent.command(install.aat, "mcp", "--url", f"{url}/mcp")[0],
            args=agent.command(install.aat, "mcp", "--url", f"{url}/mcp")[1:],
            env={**agent_env, "AAT_AGENT_TOKEN": token},
            cwd=agent_work,
        )
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"run_tool", "run_tool_confirmed", "job_status"} <= names
            hello = await client.call_tool(
                "run_tool", {"tool": "hello-world", "args": {"name": "Ada"}}
            )
            assert hello.structured_content is not None
            assert hello.structured_content["status"] == "succeeded", hello.structured_content
            assert hello.structured_content["result"] == {"greeting": "Hello, Ada!"}
            queued = await client.call_tool(
                "run_tool_confirmed",
                {"tool": "outbox", "action": "send-message", "args": MESSAGE},
            )
            answer = queued.structured_content
            assert answer is not None and answer["status"] == "pending_approval", answer
            job_id = int(answer["job"])

            await anyio.to_thread.run_sync(approve_in_chromium, url, job_id)

            deadline = time.monotonic() + 60
            status: dict[str, object] = {}
            while time.monotonic() < deadline:
                done = await client.call_tool("job_status", {"job": job_id})
                assert done.structured_content is not None
                status = dict(done.structured_content)
                if status["status"] not in ("approved", "running", "pending_approval"):
                    break
                await anyio.sleep(0.3)
            assert status["status"] == "succeeded", status
    messages = sorted((home / "outbox").glob("*.json"))
    assert len(messages) == 1, messages
    sent = json.loads(messages[0].read_text())
    assert sent["subject"] == MESSAGE["subject"] and sent["to"] == MESSAGE["to"], sent
    assert messages[0].stat().st_uid == svc.uid  # written by the service account's worker
    assert not (agent_work / ".local").exists()  # the relay kept nothing of its own
