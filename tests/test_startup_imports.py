"""What `aat mcp` in-process imports before its first answer: what that answer needs, no more."""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_in_process_bridge_loads_no_other_command_nor_the_chat_surface() -> None:
    # The modules `aat mcp` (generic surface, no server running) imports to answer.
    code = (
        "import sys, webplatform.cli, webplatform.cli.main, webplatform.cli.daemons, "
        "webplatform.mcp.transports.stdio, webplatform.mcp.server; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", f"import json; {code}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = set(json.loads(done.stdout))
    unneeded = {
        "webplatform.mcp.chat",  # only `--surface chat`
        "webplatform.cli.admin",  # `aat check`, `aat config`, `aat operator`
        "webplatform.cli.run",
        "webplatform.cli.service",
        "argon2",  # operator passwords: the dashboard's, never the bridge's
        "dashboard",
        "apprise",
        "alembic",  # only when the database is behind the migrations
    }
    assert not loaded & unneeded
