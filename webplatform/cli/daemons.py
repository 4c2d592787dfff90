"""`aat serve`, `aat mcp`, `aat worker`: the long-running processes."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from typing import TYPE_CHECKING

from webplatform.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    notify_refusal,
    say_confinement,
    settings_from,
)
from webplatform.config import get_settings

if TYPE_CHECKING:
    from webplatform.platform import Platform


def cmd_worker(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Run approved jobs until interrupted."""
    from webplatform.platform import Platform
    from webplatform.worker import make_worker

    settings = settings_from(ns)
    if (refused := notify_refusal(settings, "aat worker")) is not None:
        return refused
    say_confinement(settings, "aat worker")
    platform = Platform(settings)
    stop = threading.Event()
    worker = make_worker(platform)
    logging.getLogger("aat.worker").info("worker %s started", worker.worker_id)
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

        return mcp_url(url=ns.url, registry=ns.registry, db=ns.db, surface=ns.surface)
    from webplatform.mcp.stdio import run_stdio

    settings = settings_from(ns)
    say_confinement(settings, "aat mcp", after_s=1.0)
    run_stdio(settings, surface=ns.surface)
    return EXIT_OK


def cmd_serve(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Serve the dashboard, `/mcp` and an embedded worker."""
    import uvicorn

    from dashboard.app import create_app
    from dashboard.server import Server
    from dashboard.setup import print_setup_link, setup_base_url
    from webplatform.mcp.http import is_loopback
    from webplatform.platform import Platform

    settings = settings_from(ns)
    if "dashboard_url" not in settings.model_fields_set:
        # Links in MCP answers and notifications point at the port actually served, not at
        # the default 8000, unless AAT_DASHBOARD_URL says where people reach it.
        served = setup_base_url(settings, ns.host, ns.port)
        settings = settings.model_copy(update={"dashboard_url": served})
    if (refused := notify_refusal(settings, "aat serve")) is not None:
        return refused
    say_confinement(settings, "aat serve")
    platform = Platform(settings)
    if (
        not is_loopback(ns.host)
        and not settings.mcp_token.get_secret_value()
        and not _agent_tokens_exist(platform)
    ):
        print(
            f"aat serve: refusing to listen on {ns.host} without a bearer token for /mcp; "
            "mint an agent token (`aat agent add NAME`) or set AAT_MCP_TOKEN "
            "(and AAT_ALLOWED_HOSTS for the dashboard's Host names)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    app = create_app(settings, platform=platform, embed_worker=not ns.no_worker, local_socket=True)
    print_setup_link(settings, platform, host=ns.host, port=ns.port)
    # uvicorn believes X-Forwarded-For from loopback unless told otherwise: only the proxies
    # AAT_TRUSTED_PROXIES names may set the client address audit events and login limits see.
    proxies = settings.trusted_proxy_list
    config = uvicorn.Config(
        app,
        host=ns.host,
        port=ns.port,
        log_level="info",
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
    )
    server = Server(config)
    server.run()
    return EXIT_OK if server.started else EXIT_FAILED


def _agent_tokens_exist(platform: Platform) -> bool:
    """True while an active agent token guards `/mcp` (see `webplatform.mcp.http.BearerGate`)."""
    from webplatform.store import agents

    return platform.transact(lambda s: agents.active_agents_exist(session=s), write=False)
