"""aat in front of MCP servers nobody here wrote (SPEC §22), pinned and offline:
`@modelcontextprotocol/server-filesystem` and `@modelcontextprotocol/server-everything` from
tests/mcp/node (`make tests/mcp/node/node_modules/.installed`), and `mcp-server-git` from
PyPI (a test dependency). Each is a registry entry; calls go through the one door and the
real worker.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import free_port
from stepup_helpers import job_step_up

from webplatform import servers
from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs.answers import Answer, Refusal, Status
from webplatform.jobs.services import Consent, RunCall, request_run
from webplatform.platform import Actor, Platform
from webplatform.process import runner, server_pool
from webplatform.store.models import Surface
from webplatform.worker import Worker

pytestmark = pytest.mark.integration

NODE_MODULES = Path(__file__).resolve().parents[1] / "mcp" / "node" / "node_modules"
FILESYSTEM = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
GIT_SERVER = Path(sys.executable).with_name("mcp-server-git")


@pytest.fixture(autouse=True)
def _fresh_pool() -> Iterator[None]:
    server_pool.POOL.stop_all()
    yield
    server_pool.POOL.stop_all()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path.parent / f"{tmp_path.name}-registry"
    (folder / "servers").mkdir(parents=True)
    return folder


def add_server(root: Path, name: str, text: str) -> None:
    (root / "servers" / name).mkdir()
    (root / "servers" / name / "server.yaml").write_text(f"name: {name}\n{text}")


@pytest.fixture
def platform_settings(settings: Settings, root: Path, tmp_path: Path) -> Settings:
    """Three real servers: files (stdio, node), git (stdio, python), and everything's
    streamable HTTP endpoint (its port chosen per test, added by the test that starts it)."""
    outside = tmp_path.parent
    add_server(
        root,
        "files",
        "description: The project's files\n"
        # The server itself is told it may use the folder above the workspace: what keeps
        # it inside is its confinement.
        f"command: [node, {FILESYSTEM}, $WORKSPACE, {outside}]\n"
        f"reads: [{NODE_MODULES}]\n"
        "tools:\n  write_file: {preview: read_text_file}\n",
    )
    add_server(
        root,
        "git",
        "description: The project's repository\n"
        f"command: [{GIT_SERVER}, --repository, $WORKSPACE]\n",
    )
    return settings.model_copy(update={"registry": str(root)})


def agent(tmp_path: Path) -> Actor:
    return Actor(surface=Surface.mcp_stdio, client="test-agent", cwd=tmp_path)


def call(
    platform: Platform, tmp_path: Path, tool: str, action: str, consent: Consent, **args: object
) -> Answer:
    try:
        return request_run(
            platform=platform,
            call=RunCall(kind="tool", name=tool, action=action, args=dict(args)),
            actor=agent(tmp_path),
            consent=consent,
        )
    except Refusal as refused:
        return refused.answer


def accept(platform: Platform, tmp_path: Path, name: str) -> None:
    servers.refresh(platform, servers.find(platform, name), tmp_path)
    assert servers.accept(platform, name, by="ada")


def approve_and_run(platform: Platform, job_id: int) -> None:
    proof = job_step_up(platform, job_id, "olga")
    decisions.approve(
        platform=platform,
        job_id=job_id,
        operator="olga",
        digest=proof.digest,
        address="127.0.0.1",
        step_up=proof,
    )
    work = Worker(
        platform=platform,
        settings=platform.settings,
        load_registry=platform.registry,
        run=runner.run,
        worker_id="w-test",
    )
    assert work.run_once()
    assert not work.run_once()


def test_filesystem_reads_at_once_and_writes_once_after_approval(
    platform: Platform, tmp_path: Path
) -> None:
    (tmp_path / "plan.txt").write_text("step one")
    accept(platform, tmp_path, "files")
    read = call(platform, tmp_path, "files", "read_text_file", Consent.NONE, path="plan.txt")
    assert read.status is Status.succeeded and "step one" in str(read.result)
    target = str(tmp_path / "plan.txt")
    queued = call(
        platform, tmp_path, "files", "write_file", Consent.QUEUE, path=target, content="step two"
    )
    assert queued.status is Status.pending_approval and queued.job is not None
    assert (tmp_path / "plan.txt").read_text() == "step one"
    approve_and_run(platform, queued.job)
    assert (tmp_path / "plan.txt").read_text() == "step two"


def test_filesystem_outside_the_workspace_is_refused_by_confinement(
    platform: Platform, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere.txt"
    outside.write_text("private")
    accept(platform, tmp_path, "files")
    answer = call(platform, tmp_path, "files", "read_text_file", Consent.NONE, path=str(outside))
    # The server was told it may read there; its confinement says no.
    assert answer.status is Status.failed and "private" not in str(answer)


def test_git_status_at_once_and_one_commit_after_approval(
    platform: Platform, tmp_path: Path
) -> None:
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "config", "user.email", "t@example.org"], check=True)
    subprocess.run([*git, "config", "user.name", "T"], check=True)
    (tmp_path / "a.txt").write_text("a")
    subprocess.run([*git, "add", "a.txt"], check=True)
    accept(platform, tmp_path, "git")
    status = call(platform, tmp_path, "git", "git_status", Consent.NONE, repo_path=str(tmp_path))
    assert status.status is Status.succeeded and "a.txt" in str(status.result)
    queued = call(
        platform,
        tmp_path,
        "git",
        "git_commit",
        Consent.QUEUE,
        repo_path=str(tmp_path),
        message="first",
    )
    assert queued.status is Status.pending_approval and queued.job is not None
    approve_and_run(platform, queued.job)
    log = subprocess.run([*git, "log", "--oneline"], capture_output=True, text=True, check=True)
    assert log.stdout.count("\n") == 1 and "first" in log.stdout


def test_everything_over_streamable_http(platform: Platform, root: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {"PATH": os.environ["PATH"], "PORT": str(port)}
    with subprocess.Popen(
        ["node", str(EVERYTHING), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as upstream:
        try:
            wait_for_port(port)
            add_server(
                root,
                "everything",
                f"description: Everything\nurl: http://127.0.0.1:{port}/mcp\n",
            )
            accept(platform, tmp_path, "everything")
            echoed = call(platform, tmp_path, "everything", "echo", Consent.NONE, message="hi")
            assert echoed.status is Status.succeeded and "hi" in str(echoed.result)
            # It offers sampling and elicitation only to clients that take them; aat's
            # does not, so no such tool is ever offered through aat.
            offered = [a.name for a in platform.registry().tools["everything"].actions]
            assert "echo" in offered and not any("sampling" in name for name in offered)
        finally:
            upstream.terminate()


def wait_for_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.05)
