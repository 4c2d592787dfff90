"""The attack from the hostile review, replayed through a real MCP client (SPEC §14, §10).

An agent with nothing but MCP queues an irreversible `outbox send-message`, then gets a
reversible tool to approve the queued job in aat's database, hoping a worker runs it. Two
walls stand in the way, and each test here takes one of them alone:

- confinement: the tool cannot open aat's database (the `escape` test tool obeys the agent
  blindly, so only the operating system's refusal stops it);
- signed decisions: a job moved to `approved` by anything but the dashboard never runs.

Confinement is itself two walls, namespaces and Landlock, and either alone keeps the
database shut; so each of them also gets a test that fails when it alone is switched off:
what the namespaces show but Landlock refuses, and what Landlock lets a tool look up but the
namespaces hide.

The xlsx variant of the chain (planting a module beside the tool through `dump save=`) is
stopped earlier, by the xlsx tool's own input checks: that is what its test checks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from mcp_helpers import body, connect
from platforms import platform_with
from sqlmodel import text

from webplatform.config import EXAMPLES_ROOT
from webplatform.jobs.tracking import job_answer
from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.trust import signing
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

XLSX = EXAMPLES_ROOT / "tools" / "xlsx"
TEST_TOOLS = Path(__file__).resolve().parents[1]
MESSAGE = {"to": "attacker@example.org", "subject": "s", "body": "b"}
# `dump` writes "## <sheet>" (a Python comment), then one line per row: valid Python.
PAYLOAD = [
    "import os, sqlite3",
    "db = sqlite3.connect(os.path.join(os.environ['AAT_HOME'], 'aat.db'))",
    "db.execute(\"UPDATE job SET state = 'approved' WHERE state = 'pending_approval'\")",
    "db.commit()",
]


def outbox_is_empty(platform: Platform) -> bool:
    outbox = platform.settings.home / "outbox"
    return not outbox.exists() or not any(outbox.iterdir())


def settle(platform: Platform, job_id: int) -> str:
    """The job's state once a polling worker has had time to claim an approved job."""
    deadline = time.monotonic() + 5
    state = job_answer(platform=platform, job_id=job_id).status.value
    while state in ("approved", "running") and time.monotonic() < deadline:
        time.sleep(0.05)
        state = job_answer(platform=platform, job_id=job_id).status.value
    return state


@pytest.mark.parametrize("backend", ["sqlite"])  # the database a tool could open is a file
async def test_confinement_keeps_a_tool_out_of_the_database(platform: Platform, era: str) -> None:
    both = platform_with(platform.settings, registry=f"{EXAMPLES_ROOT}:{TEST_TOOLS}")
    async with connect(both, era) as client:
        queued = body(
            await client.call_tool(
                "run_tool_confirmed",
                {"tool": "outbox", "action": "send-message", "args": MESSAGE},
            )
        )
        attack = body(
            await client.call_tool("run_tool", {"tool": "escape", "action": "approve-all"})
        )
    assert queued["status"] == "pending_approval"
    assert attack["status"] == "failed", attack
    assert "aat.db" in attack["error"]
    assert job_answer(platform=both, job_id=queued["job"]).status.value == "pending_approval"


async def _probes(platform: Platform, *targets: tuple[str, str]) -> list[dict[str, Any]]:
    """What the `escape` tool got for each (target, mode), through a real MCP client."""
    both = platform_with(platform.settings, registry=f"{EXAMPLES_ROOT}:{TEST_TOOLS}")
    async with connect(both, "legacy") as client:
        return [
            body(
                await client.call_tool(
                    "run_tool",
                    {
                        "tool": "escape",
                        "action": "probe",
                        "args": {"target": target, "mode": mode},
                    },
                )
            )
            for target, mode in targets
        ]


@pytest.mark.parametrize("backend", ["sqlite"])  # the files a tool could reach: any backend
async def test_landlock_alone_refuses_what_the_namespaces_show(platform: Platform) -> None:
    # The tool's mount namespace holds the host's whole /proc (the runtime needs its own
    # process there): every process's command line, the kernel's version and settings.
    # Landlock's file rules let it read only its own process and three files, so these are
    # refused by Landlock alone: no namespace hides them (a path not in the view would be
    # "No such file or directory").
    answers = await _probes(
        platform,
        ("/proc", "read"),  # every process on the host
        (f"/proc/{os.getpid()}/cmdline", "read"),  # aat's own command line
        ("/proc/version", "read"),
        ("/proc/sys/kernel/hostname", "read"),
    )
    assert [a["status"] for a in answers] == ["failed"] * 4, answers
    assert all("Permission denied" in a["error"] for a in answers), answers


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_namespaces_alone_hide_that_aats_files_exist(platform: Platform) -> None:
    # Landlock refuses opening aat's files but not looking them up: with Landlock alone a
    # tool learns that the database and the keys are there, their sizes and when each last
    # changed (so when calls come and go). Only the mount namespace, where AAT_HOME is not
    # there at all, keeps that from it.
    home = platform.settings.home
    signing.signer_for(home)  # the decision key, as a dashboard makes it
    key = home / signing.PRIVATE_KEY_FILE
    assert (home / "aat.db").exists() and key.exists()
    answers = await _probes(
        platform, (str(home / "aat.db"), "stat"), (str(key), "stat"), (str(home), "stat")
    )
    assert [a["status"] for a in answers] == ["failed"] * 3, answers
    assert all("No such file or directory" in a["error"] for a in answers), answers


@pytest.fixture
def dashboard_key(platform: Platform) -> None:
    """The decision key a dashboard makes on its first start, so the worker verifies and runs
    what carries a valid decision (without it the worker runs nothing at all)."""
    signing.signer_for(platform.settings.home)


async def test_a_job_approved_behind_the_dashboards_back_never_runs(
    platform: Platform, era: str, dashboard_key: None, worker: Worker
) -> None:
    del dashboard_key, worker
    async with connect(platform, era) as client:
        queued = body(
            await client.call_tool(
                "run_tool_confirmed",
                {"tool": "outbox", "action": "send-message", "args": MESSAGE},
            )
        )
    # What the payload would do had it reached the database.
    with session_scope(platform.engine) as session:
        session.exec(
            text("UPDATE job SET state = 'approved' WHERE id = :id").bindparams(id=queued["job"])
        )  # type: ignore[call-overload]
    answer = job_answer(platform=platform, job_id=queued["job"])
    assert settle(platform, queued["job"]) == "failed", answer
    assert "signature" in (job_answer(platform=platform, job_id=queued["job"]).error or "")
    assert outbox_is_empty(platform)


async def test_the_xlsx_tool_will_not_plant_code(platform: Platform, tmp_path: Path) -> None:
    book = tmp_path / "payload.xlsx"
    wb = openpyxl.Workbook()
    for line in PAYLOAD:
        wb.active.append([line])
    wb.save(book)
    planted = [XLSX / "openpyxl.py", XLSX / "openpyxl.txt"]
    async with connect(platform, "legacy") as client:
        attempts = [
            body(
                await client.call_tool(
                    "run_tool",
                    {"tool": "xlsx", "action": "dump", "args": {"path": str(book), "save": str(p)}},
                )
            )
            for p in planted
        ]
        listed = body(
            await client.call_tool(
                "run_tool", {"tool": "xlsx", "action": "list-sheets", "args": {"path": str(book)}}
            )
        )
    assert [a["status"] for a in attempts] == ["failed", "failed"], attempts
    assert ".txt or .md" in attempts[0]["error"]
    assert not any(p.exists() for p in planted)
    assert listed["status"] == "succeeded"  # the real openpyxl, not a planted one
