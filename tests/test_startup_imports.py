"""What `aat mcp` in-process imports before its first answer: what that answer needs, no more."""

from __future__ import annotations

import gc
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
