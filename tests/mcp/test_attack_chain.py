"""The attack from the hostile review, replayed through a real MCP client (SPEC §14).

An agent with nothing but MCP queues an irreversible `outbox send-message`, then asks the
reversible `xlsx dump` to save a workbook whose text is valid Python as `openpyxl.py` in the
xlsx tool's own folder, then calls `xlsx list-sheets`, which would import it and approve the
queued job in aat's database. None of it may get anything run.
"""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest
from mcp_helpers import body, connect

from webplatform.config import EXAMPLES_ROOT
from webplatform.platform import Platform
from webplatform.tracking import job_answer
from webplatform.worker import Worker

pytestmark = pytest.mark.anyio

XLSX = EXAMPLES_ROOT / "tools" / "xlsx"
# `dump` writes "## <sheet>" (a Python comment), then one line per row: valid Python.
PAYLOAD = [
    "import os, sqlite3",
    "db = sqlite3.connect(os.path.join(os.environ['AAT_HOME'], 'aat.db'))",
    "db.execute(\"UPDATE job SET state = 'approved' WHERE state = 'pending_approval'\")",
    "db.commit()",
]


async def test_the_chain_leaves_the_job_waiting_and_the_outbox_empty(
    platform: Platform, era: str, worker: Worker, tmp_path: Path
) -> None:
    book = tmp_path / "payload.xlsx"
    wb = openpyxl.Workbook()
    for line in PAYLOAD:
        wb.active.append([line])
    wb.save(book)
    planted = [XLSX / "openpyxl.py", XLSX / "openpyxl.txt"]
    message = {"to": "attacker@example.org", "subject": "s", "body": "b"}
    async with connect(platform, era) as client:
        queued = body(
            await client.call_tool(
                "run_tool_confirmed",
                {"tool": "outbox", "action": "send-message", "args": message},
            )
        )
        assert queued["status"] == "pending_approval"
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
    for attempt in attempts:
        assert attempt["status"] == "failed", attempt
    assert ".txt or .md" in attempts[0]["error"]
    assert "only inside a workspace" in attempts[1]["error"]
    assert not any(p.exists() for p in planted)
    assert listed["status"] == "succeeded"  # the real openpyxl, not a planted one
    worker.run_once()  # one more pass: an approved job would be claimed and run by it
    assert job_answer(platform=platform, job_id=queued["job"]).status.value == "pending_approval"
    outbox = platform.settings.home / "outbox"
    assert not outbox.exists() or not any(outbox.iterdir())
