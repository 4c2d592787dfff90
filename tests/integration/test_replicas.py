"""Replicas behind a load balancer without stickiness (SPEC §24).

Three `aat serve` on one PostgreSQL behind HAProxy, round-robin per request. MCP SDK clients
of both eras call tools through the balancer; irreversible calls wait while an operator
approves them through the balancer's dashboard; one replica is SIGKILLed midway. Every call is
answered (a legacy client whose session lived on the killed replica is told 404 and opens a
new session, as the MCP specification says) and every approved job runs exactly once.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from proc_helpers import Procs, aat_env, job_rows, outbox_files, wait_for
from serving import free_port
from sqlmodel import select

from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store import AuditEvent, JobState, session_scope

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

PASSWORD = "correct horse battery"
CLIENTS = [("legacy", n) for n in range(6)] + [("2026-07-28", n) for n in range(4)]
# 120 calls in all, every third one irreversible: 40 approvals. Each client has calls still to
# make when the replica dies (after a third are answered), which is what the test needs; more
# calls only repeat the same round trips (300 took four times as long for the same assertions).
CALLS_EACH = 12
REPLICAS = 3


def haproxy_config(front: int, ports: list[int], folder: Path) -> Path:
    """Round-robin per request, no stickiness; a replica is out once `/readyz` fails."""
    servers = "\n".join(f"  server r{n} 127.0.0.1:{p}" for n, p in enumerate(ports))
    text = f"""global
  maxconn 1000
defaults
  mode http
  timeout connect 2s
  timeout client 180s
  timeout server 180s
  retries 3
  option redispatch 1
frontend aat
  bind 127.0.0.1:{front}
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1:{front}
  timeout check 5s
  default-server check inter 1s fall 3 rise 2
{servers}
"""
    path = folder / "haproxy.cfg"
    path.write_text(text)
    return path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def balancer(tmp_path: Path) -> Iterator[tuple[int, list[int]]]:
    """HAProxy (Debian's package; `.ci/run` installs it) in front of ports not yet served."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    assert Path(binary).exists(), "haproxy is not installed: apt-get install haproxy"
    front, ports = free_port(), [free_port() for _ in range(REPLICAS)]
    config = haproxy_config(front, ports, tmp_path)
    log = (tmp_path / "haproxy.log").open("ab")
    proc = subprocess.Popen(
        [binary, "-db", "-f", str(config)],
        stdout=log,
        stderr=log,
        preexec_fn=lambda: ctypes.CDLL(None).prctl(1, signal.SIGKILL),
    )
    try:
        yield front, ports
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@dataclass
class Tally:
    """What the clients saw."""

    answered: int = 0
    reopened: int = 0  # 404 for a session whose replica was killed: a new session, then retry
    errors: list[tuple[float, float, str]] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)


def _call(n: int, who: str) -> tuple[str, dict[str, Any]]:
    if n % 3 == 2:
        subject = f"{who}-{n}"
        args = {"to": "ops@example.org", "subject": subject, "body": "hello"}
        return "run_tool_confirmed", {"tool": "outbox", "action": "send-message", "args": args}
    return "run_tool", {"tool": "hello-world", "args": {"name": f"{who}-{n}"}}


async def _client(url: str, mode: str, who: str, tally: Tally) -> None:
    """`CALLS_EACH` calls one after the other; a lost session is opened again, as clients do."""
    done = [0]  # calls answered or failed so far
    while done[0] < CALLS_EACH:
        started = time.monotonic()
        in_call: list[bool] = [False]
        try:
            async with Client(url, mode=mode) as client:
                await _calls(client, who, tally, done, in_call)
        except Exception as exc:  # the session's own streams, on the killed replica
            tally.errors.append((started, time.monotonic(), f"{who} session: {exc!r}"))
            if in_call[0]:
                done[0] += 1  # whether it ran is unknown: not called again


async def _calls(
    client: Client, who: str, tally: Tally, done: list[int], in_call: list[bool]
) -> None:
    while done[0] < CALLS_EACH:
        tool, arguments = _call(done[0], who)
        started = time.monotonic()
        in_call[0] = True
        try:
            with anyio.fail_after(120):
                result = await client.call_tool(tool, arguments)
        except MCPError as exc:
            in_call[0] = False
            if "Session not found" in str(exc) or "Session terminated" in str(exc):
                tally.reopened += 1  # nothing ran: the same call on a new session
                return
            tally.errors.append((started, time.monotonic(), f"{who}#{done[0]}: {exc!r}"))
            done[0] += 1
            return
        in_call[0] = False
        assert not result.is_error, (who, done[0], result.content)
        answer = json.loads(result.content[0].text)  # type: ignore[union-attr]
        if tool == "run_tool_confirmed":
            assert answer["status"] == "succeeded", answer
            tally.subjects.append(arguments["args"]["subject"])
        tally.answered += 1
        done[0] += 1


def _approver(front: int, platform: Platform, stop: threading.Event, seen: set[int]) -> None:
    """An operator on the approvals page through the balancer, approving what waits."""
    base = f"http://127.0.0.1:{front}"
    origin = {"Origin": base}
    with httpx.Client(base_url=base, timeout=30) as web:
        r = web.post(
            "/login", data={"username": "olga", "password": PASSWORD, "next": "/"}, headers=origin
        )
        assert r.status_code == 303, r.text
        while not stop.is_set():
            # The killed replica's answer in flight fails: look again.
            with contextlib.suppress(httpx.HTTPError):
                _approve_waiting(web, platform, seen)
            stop.wait(0.2)


def _approve_waiting(web: httpx.Client, platform: Platform, seen: set[int]) -> None:
    page = web.get("/approvals")
    if page.status_code != 200:
        return
    origin = {"Origin": str(web.base_url).rstrip("/")}
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text)
    # A card whose preview has landed: the approval binds the preview the page showed.
    shown = re.findall(r'name="preview" value="([0-9a-f]{64})" form="approve-(\d+)"', page.text)
    for preview, job_id in dict(shown).items():
        assert token is not None
        form = {
            "csrf_token": token.group(1),
            "password": PASSWORD,
            "digest": _digest(platform, int(job_id)),
            "preview": preview,
            "return_to": "approvals",
        }
        done = web.post(f"/jobs/{job_id}/approve", data=form, headers=origin)
        if done.status_code < 400:
            seen.add(int(job_id))


def _digest(platform: Platform, job_id: int) -> str:
    from webplatform.jobs import states as jobs

    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return job.args_digest


async def test_three_replicas_behind_round_robin_answer_every_call_and_run_each_job_once(
    pg_settings: Settings, procs: Procs, balancer: tuple[int, list[int]]
) -> None:
    front, ports = balancer
    platform = Platform(pg_settings)
    platform.operators.add("olga", PASSWORD)
    env = aat_env(
        pg_settings,
        worker_lease_s=10,
        heartbeat_s=1,
        approval_wait_s=90,
        dashboard_url=f"http://127.0.0.1:{front}",
        allowed_hosts=f"127.0.0.1:{front}",
    )
    replicas = [procs.serve(f"serve{n}", env, port) for n, port in enumerate(ports)]
    url = f"http://127.0.0.1:{front}/mcp"
    wait_for(lambda: _ready(front), 30, "the balancer to see the replicas")

    tally, stop, approved = Tally(), threading.Event(), set[int]()
    approver = threading.Thread(target=_approver, args=(front, platform, stop, approved))
    approver.start()
    killed_at = 0.0
    try:
        with anyio.fail_after(600):
            async with anyio.create_task_group() as tg:
                for mode, n in CLIENTS:
                    tg.start_soon(_client, url, mode, f"{mode[:6]}{n}", tally)
                while tally.answered < len(CLIENTS) * CALLS_EACH // 3:
                    await anyio.sleep(0.1)
                killed_at = time.monotonic()
                procs.sigkill(replicas[1])
    finally:
        stop.set()
        approver.join(timeout=60)

    def settled() -> bool:
        live = {JobState.pending_approval, JobState.approved, JobState.running}
        return not any(JobState(r.state) in live for r in job_rows(platform.engine))

    wait_for(settled, 60, "every job to end")
    rows = job_rows(platform.engine)
    states = Counter(JobState(r.state) for r in rows)
    messages = Counter(json.loads(p.read_text())["subject"] for p in outbox_files(pg_settings))
    with session_scope(platform.engine, write=False) as session:
        claims = Counter(
            session.exec(
                select(AuditEvent.job_id).where(AuditEvent.to_state == JobState.running.value)
            ).all()
        )
    print(
        f"\n{len(CLIENTS) * CALLS_EACH} calls: {tally.answered} answered, {tally.reopened} "
        f"sessions reopened after the kill, {len(tally.errors)} errors in flight; "
        f"{len(approved)} approvals, {len(rows)} jobs {dict(states)}; runs per job "
        f"{dict(Counter(claims.values()))}"
    )
    # A legacy session is lost only with the replica that owned it: at most once per client.
    assert tally.reopened <= sum(1 for mode, _n in CLIENTS if mode == "legacy"), tally.reopened
    # Only requests in flight when the replica died may fail.
    print("\n".join(what for _s, _e, what in tally.errors))
    for started, ended, what in tally.errors:
        assert started <= killed_at <= ended, what
    assert len(tally.errors) <= len(CLIENTS), tally.errors
    assert tally.answered + len(tally.errors) == len(CLIENTS) * CALLS_EACH
    # Every approved job ran once: one claim, at most one message, and every answered
    # irreversible call's message exists exactly once.
    assert set(claims.values()) <= {1}
    assert max(messages.values()) == 1
    assert all(messages[s] == 1 for s in tally.subjects)
    assert states[JobState.succeeded] >= len(tally.subjects)
    assert set(states) <= {JobState.succeeded, JobState.lost}, states
    platform.engine.dispose()


def _ready(front: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{front}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
