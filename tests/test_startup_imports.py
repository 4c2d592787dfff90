"""What `aat` imports before it answers: what that answer needs, no more.

`aat mcp` in-process loads the bridge and nothing of the other commands; `aat --help` and a
mistyped command load no settings and no store; a command on the database loads the store
and not the MCP SDK, the web stack or the rules engine. Hundreds of tests and every user
command pay for what a start imports.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys


def modules_after(code: str) -> set[str]:
    """The modules loaded in a fresh interpreter once `code` ran (it may raise SystemExit)."""
    runner = (
        "import json, sys\n"
        f"try:\n    {code}\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", runner],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_help_version_and_a_mistyped_command_load_no_settings_and_no_store() -> None:
    for argv in (["--help"], ["--version"], ["nosuch"], ["rules", "--help"]):
        loaded = modules_after(f"from webplatform.cli.main import main; main({argv!r})")
        assert "webplatform.cli.main" in loaded
        # The store (SQLAlchemy, SQLModel, the tables) and the settings (pydantic) are what a
        # bare start cost before: a second of CPU and 50 MB for an answer argparse gives.
        heavy = {"sqlalchemy", "sqlmodel", "webplatform.store", "webplatform.config", "pydantic"}
        assert not loaded & heavy, (argv, loaded & heavy)


def test_the_commands_on_the_database_load_no_mcp_sdk_nor_what_they_do_not_use() -> None:
    # What `aat run`, `aat operator`, `aat agent`, `aat rules` and `aat keys` import, each
    # command's own modules included (imported when it runs).
    code = (
        "import webplatform.cli.main, webplatform.cli.run, webplatform.cli.admin, "
        "webplatform.cli.agents, webplatform.cli.rules, webplatform.cli.trust, "
        "webplatform.jobs.services, webplatform.jobs.previews, webplatform.jobs.tracking, "
        "webplatform.trust.rulebook, webplatform.process.runner, webplatform.platform"
    )
    loaded = modules_after(code)
    assert {"sqlalchemy", "webplatform.platform"} <= loaded
    unneeded = {
        "mcp",  # the MCP SDK: only `aat mcp`, `aat serve` and a call to an upstream server
        "mcp_types",
        "webplatform.process.server_link",
        "fastapi",
        "starlette",
        "uvicorn",
        "dashboard",
        "argon2",  # operator passwords: only where one is set or checked
        "cedarpy",  # the rules engine, only once there are rules
        "opentelemetry.sdk",
        "apprise",
    }
    assert not loaded & unneeded, loaded & unneeded


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
        "cedarpy",  # the rules engine, only once there are rules
        "opentelemetry.sdk",  # only when OTEL_* variables ask for traces or metrics
        "prometheus_client",  # only `aat serve`'s /metrics
    }
    assert not loaded & unneeded


def test_the_bridge_turns_the_cyclic_collector_back_on_once_built() -> None:
    # `aat` turns the collector off while `aat mcp` imports; left off, a long session
    # would never free a reference cycle.
    from webplatform.mcp.transports.stdio import settle_heap

    gc.disable()
    try:
        settle_heap()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()
