"""`aat serve`: the dashboard, `/mcp` and an embedded worker on one uvicorn server.

The command line names this module when `aat serve` runs (it does not import it), so the
platform never depends on the dashboard.
"""

from __future__ import annotations

import sys

import uvicorn

from dashboard.app import create_app
from dashboard.server import Server
from dashboard.setup import print_setup_link, setup_base_url
from webplatform.config import Settings
from webplatform.mcp.transports.http import is_loopback
from webplatform.platform import Platform

# The command line's exit codes (webplatform.cli.common), repeated: this module is below it.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def served_settings(settings: Settings, host: str, port: int) -> Settings:
    """Links in MCP answers and notifications point at the port actually served, not at the
    default 8000, unless AAT_DASHBOARD_URL says where people reach it."""
    if "dashboard_url" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"dashboard_url": setup_base_url(settings, host, port)})


def serve(settings: Settings, *, host: str, port: int, worker: bool) -> int:
    """Run until stopped; the exit code `aat serve` returns."""
    platform = Platform.when_reachable(
        settings, say=lambda line: print(f"aat serve: {line}", file=sys.stderr, flush=True)
    )
    if not is_loopback(host) and not _mcp_is_guarded(settings, platform):
        print(
            f"aat serve: refusing to listen on {host} without a bearer token for /mcp; "
            "mint an agent token (`aat agent add NAME`) or set AAT_MCP_TOKEN "
            "(and AAT_ALLOWED_HOSTS for the dashboard's Host names)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    app = create_app(settings, platform=platform, embed_worker=worker, local_socket=True)
    print_setup_link(settings, platform, host=host, port=port)
    # uvicorn believes X-Forwarded-For from loopback unless told otherwise: only the proxies
    # AAT_TRUSTED_PROXIES names may set the client address audit events and login limits see.
    proxies = settings.trusted_proxy_list
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
    )
    server = Server(config)
    server.run()
    return EXIT_OK if server.started else EXIT_FAILED


def _mcp_is_guarded(settings: Settings, platform: Platform) -> bool:
    """True while AAT_MCP_TOKEN or an active agent token guards `/mcp` (`http.BearerGate`)."""
    if settings.mcp_token.get_secret_value():
        return True
    return platform.tokens.any_active()
