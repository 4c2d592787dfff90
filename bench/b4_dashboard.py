"""B4: the dashboard with 100,000 jobs and 1,000 pending approvals, and with 100 rules.

The history is seeded straight through the store's table (one bulk insert), then pages are
timed in process through an ASGI client (server time, no network), round-robin, p95 over
ROUNDS requests each. A copy of the seeded home gets 100 rules (`aat rules add`, as an admin
makes them, each signed), and its approvals page is timed in the same rounds. `aat serve`
RSS is read from /proc after it has served those pages.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
from sqlalchemy import func, insert, select

from bench.common import (
    Report,
    aat_argv,
    aat_env,
    add_operator,
    free_port,
    median_ms,
    ms,
    p95_ms,
    rss_mb,
    temp_home,
    wait_http,
)
from dashboard.app import create_app
from webplatform.config import Settings
from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.store.models import Job, JobState, Surface

TITLE = "dashboard with 100,000 jobs and 1,000 pending approvals"
JOBS, PENDING = 100_000, 1_000
ROUNDS = 40
PAGE_SIZE = 50
TOOLS = ("hello-world", "xlsx", "outbox", "summarize", "gen-a", "gen-b", "gen-c", "gen-d")
DONE = (JobState.succeeded, JobState.failed, JobState.timed_out, JobState.denied)
PASSWORD = "bench-password-1"
RULES = 100
RULES_LABEL = "/approvals (1,000 pending, 100 rules)"


def rules_yaml(count: int) -> str:
    """`count` rules over the example tools: allow, deny and ask, with argument conditions."""
    out = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            out.append(
                "- effect: allow\n  tool: outbox\n  action: send-message\n"
                f"  args: {{to: '*@team{i}.example.org', subject: {{one_of: [Weekly, Daily]}}}}\n"
                f"  expires_in: 8h\n  max_runs: {10 + i}\n  note: team {i}'s reports\n"
            )
        elif kind == 1:
            out.append(
                f"- effect: deny\n  tool: outbox\n  action: delete-messages\n  requester: bot-{i}\n"
            )
        else:
            out.append(
                f"- effect: ask\n  tool: hello-world\n  action: greet\n  args: {{name: user-{i}}}\n"
            )
    return "".join(out)


def add_rules(home: Path, count: int) -> None:
    """`aat rules add FILE --by bench --password-stdin` with `count` rules."""
    path = home.with_name(f"{home.name}-rules.yaml")
    path.write_text(rules_yaml(count))
    done = subprocess.run(
        aat_argv("rules", "add", str(path), "--by", "bench", "--password-stdin"),
        input=PASSWORD + "\n",
        text=True,
        env=aat_env(home),
        check=True,
        capture_output=True,
    )
    assert len(done.stdout.split()) == count, done.stdout[-300:]


def seed(platform: Platform) -> int:
    """Insert the history and the queue in bulk; return the highest job id."""
    rng = random.Random(6)
    start = datetime.now(UTC) - timedelta(days=30)
    rows: list[dict[str, Any]] = []
    for i in range(JOBS):
        pending = i >= JOBS - PENDING
        name = TOOLS[rng.randrange(len(TOOLS))]
        at = start + timedelta(seconds=i * 25)
        args = json.dumps({"name": f"user-{i}", "n": i}, sort_keys=True)
        rows.append(
            {
                "kind": "tool",
                "name": "outbox" if pending else name,
                "action": "send-message" if pending else "run",
                "args_json": args,
                "args_digest": f"{i:064x}",
                "irreversible": pending,
                "state": JobState.pending_approval if pending else rng.choice(DONE),
                "surface": rng.choice(list(Surface)),
                "client": "bench",
                "requested_by": "bench",
                "created_at": at,
                "updated_at": at,
                "expires_at": datetime.now(UTC) + timedelta(hours=2) if pending else None,
                "exit_code": None if pending else 0,
                "result_json": None if pending else '{"ok": true}',
            }
        )
    with platform.engine.begin() as conn:
        for chunk in range(0, len(rows), 10_000):
            conn.execute(insert(Job), rows[chunk : chunk + 10_000])
    with session_scope(platform.engine) as session:
        return int(session.exec(select(func.max(Job.id))).one()[0])  # type: ignore[call-overload]


def pages(max_id: int) -> dict[str, str]:
    """The pages timed, by label."""
    deep = max_id - 500 * PAGE_SIZE
    return {
        "/jobs first page": "/jobs",
        "/jobs filtered (tool + state)": "/jobs?tool=xlsx&state=failed",
        "/jobs 500 pages deep (before_id)": f"/jobs?before_id={deep}",
        "/approvals (1,000 pending)": "/approvals",
    }


Site = tuple[Settings, dict[str, str]]


async def time_pages(sites: list[Site]) -> dict[str, list[float]]:
    """Server time of each site's pages over ROUNDS rounds, through in-process ASGI clients
    (one app per site, each logged in), every page of every site once per round."""
    base = "http://127.0.0.1:8000"
    samples: dict[str, list[float]] = {k: [] for _, paths in sites for k in paths}
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for settings, paths in sites:
            app = create_app(settings, embed_worker=False, mcp=False)
            stack.callback(app.state.platform.engine.dispose)
            http = await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app), base_url=base, headers={"Origin": base}
                )
            )
            answer = await http.post("/login", data={"username": "bench", "password": PASSWORD})
            assert answer.status_code in (200, 303), answer.text[:300]
            for label, path in paths.items():  # warm: templates compiled, caches filled
                answer = await http.get(path)
                assert answer.status_code == 200, (label, answer.status_code, answer.text[:300])
            clients.append((http, paths))
        for _ in range(ROUNDS):
            for http, paths in clients:
                for label, path in paths.items():
                    started = time.perf_counter()
                    answer = await http.get(path)
                    samples[label].append(time.perf_counter() - started)
                    assert answer.status_code == 200
    return samples


def serve_rss(home: Path, paths: dict[str, str]) -> float:
    """RSS of a real `aat serve` on the seeded database after it served every page."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        aat_argv("serve", "--port", str(port)),
        env=aat_env(home, AAT_DASHBOARD_URL=base),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"{base}/healthz")
        with httpx.Client(base_url=base, headers={"Origin": base}, timeout=60) as http:
            http.post("/login", data={"username": "bench", "password": PASSWORD})
            for _ in range(5):
                for path in paths.values():
                    assert http.get(path).status_code == 200
        time.sleep(1)
        return rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    with temp_home("b4") as home, temp_home("b4-rules") as ruled:
        settings = Settings(home=home)
        platform = Platform(settings)
        t0 = time.perf_counter()
        max_id = seed(platform)
        seeded = time.perf_counter() - t0
        platform.engine.dispose()
        add_operator(home, "bench", PASSWORD)  # the first operator: an admin
        shutil.copytree(home, ruled, dirs_exist_ok=True)
        add_rules(ruled, RULES)
        paths = pages(max_id)
        sites = [(settings, paths), (Settings(home=ruled), {RULES_LABEL: "/approvals"})]
        samples = anyio.run(time_pages, sites)
        rss = serve_rss(home, paths)
    for label, values in samples.items():
        limit = 100.0 if label.startswith("/approvals") else 50.0
        p95 = p95_ms(values)
        report.add(
            f"{label}: server time p95",
            ms(p95),
            baseline=f"median {ms(median_ms(values))}",
            target=f"<= {limit:g} ms",
            met=p95 <= limit,
        )
    report.add(
        "aat serve RSS after serving these pages",
        f"{rss:.0f} MB",
        target="<= 200 MB",
        met=rss <= 200,
    )
    report.notes.append(
        f"B4: {JOBS} jobs ({PENDING} pending) inserted in bulk in {seeded:.1f} s; "
        f"{ROUNDS} requests per page, round-robin, through httpx's ASGI transport in process "
        f"(the app's whole request handling, no socket). The {RULES} rules (a third each "
        "allow, deny and ask, with argument conditions) are in a copy of the seeded home, "
        "its page timed in the same rounds."
    )
