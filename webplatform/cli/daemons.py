"""`aat serve`, `aat mcp`, `aat worker`: the long-running processes."""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import threading

from webplatform import telemetry
from webplatform.cli.common import (
    EXIT_OK,
    notify_refusal,
    say_confinement,
    settings_from,
)
from webplatform.config import get_settings


def cmd_worker(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Run approved jobs until interrupted."""
    from webplatform.platform import Platform
    from webplatform.worker import make_worker

    settings = settings_from(ns)
    if (refused := notify_refusal(settings, "aat worker")) is not None:
        return refused
    say_confinement(settings, "aat worker")
    telemetry.start()
    platform = Platform.when_reachable(
        settings, say=lambda line: print(f"aat worker: {line}", file=sys.stderr, flush=True)
    )
    stop = threading.Event()
    worker = make_worker(platform)
    try:
        worker.run_forever(stop)
    except KeyboardInterrupt:
        stop.set()
    return EXIT_OK


def cmd_mcp(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Serve the MCP bridge on stdio; stdout carries protocol only.

    With `--url` (or `AAT_MCP_URL`) it forwards to a running `aat serve` instead, and touches
    neither the database, the registry nor `AAT_HOME`.
    """
    if ns.url or get_settings().mcp_url:
        from webplatform.cli.remote import mcp_url

        gc.enable()  # off while `aat mcp` imports (webplatform.cli); this relay serves on
        return mcp_url(url=ns.url, registry=ns.registry, db=ns.db, surface=ns.surface)
    from webplatform.mcp.transports.stdio import run_stdio

    settings = settings_from(ns)
    say_confinement(settings, "aat mcp", after_s=1.0)
    telemetry.start()
    run_stdio(settings, surface=ns.surface)
    return EXIT_OK


def cmd_serve(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Serve the dashboard, `/mcp` and an embedded worker."""
    # The dashboard sits above the platform: named here, at `aat serve` time, not imported.
    serve = importlib.import_module("dashboard.serve")
    settings = serve.served_settings(settings_from(ns), ns.host, ns.port)
    if (refused := notify_refusal(settings, "aat serve")) is not None:
        return refused
    say_confinement(settings, "aat serve")
    telemetry.start()
    code: int = serve.serve(settings, host=ns.host, port=ns.port, worker=not ns.no_worker)
    return code
