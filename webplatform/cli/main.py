"""The `aat` command line: start the dashboard, the MCP bridge and workers; run, check, configure.

No command here can approve a job: `aat run` of an irreversible action goes through the
approval queue like any other request (an import-linter contract keeps this module away
from `webplatform.jobs.decisions`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from webplatform import __version__
from webplatform.cli.common import EXIT_FAILED, EXIT_USAGE, add_common, port

# Each command's module, imported only when that command runs: `aat mcp` answers its client
# sooner without loading what `aat check`, `aat run` or `aat service` need.
HANDLERS = {
    "serve": "webplatform.cli.daemons:cmd_serve",
    "mcp": "webplatform.cli.daemons:cmd_mcp",
    "worker": "webplatform.cli.daemons:cmd_worker",
    "run": "webplatform.cli.run:cmd_run",
    "check": "webplatform.cli.admin:cmd_check",
    "surface": "webplatform.cli.admin:cmd_surface",
    "operator": "webplatform.cli.admin:cmd_operator",
    "agent": "webplatform.cli.agents:cmd_agent",
    "service": "webplatform.cli.service:cmd_service",
    "config": "webplatform.cli.admin:cmd_config",
    "keys": "webplatform.cli.trust:cmd_keys",
    "audit": "webplatform.cli.trust:cmd_audit",
    "rules": "webplatform.cli.rules:cmd_rules",
    "servers": "webplatform.cli.servers:cmd_servers",
}


def handler_for(command: str) -> Callable[[argparse.Namespace, list[str]], int]:
    """The function that runs `command`, its module imported now."""
    module, _, name = HANDLERS[command].partition(":")
    handler: Callable[[argparse.Namespace, list[str]], int] = getattr(import_module(module), name)
    return handler


def build_parser() -> argparse.ArgumentParser:
    """The `aat` argument parser."""
    parser = argparse.ArgumentParser(
        prog="aat", description="Local tools for AI agents, with a human approving what matters."
    )
    parser.add_argument("--version", action="version", version=f"aat {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_daemons(sub)
    _add_tool_commands(sub)
    _add_people_commands(sub)
    _add_host_commands(sub)
    return parser


def _add_daemons(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`aat serve`, `aat mcp` and `aat worker`: the long-running processes."""
    p = sub.add_parser("serve", help="dashboard + /mcp endpoint + embedded worker")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port, default=8000)
    p.add_argument("--no-worker", action="store_true", help="do not embed a worker")
    p.add_argument(
        "--root-path", metavar="/PREFIX", help="path prefix a reverse proxy strips (AAT_ROOT_PATH)"
    )
    add_common(p)

    p = sub.add_parser("mcp", help="the MCP bridge over stdio, for MCP clients")
    p.add_argument("--surface", choices=["generic", "chat"], default="generic")
    p.add_argument(
        "--url",
        help="forward to a running `aat serve`'s /mcp (default AAT_MCP_URL), "
        "sending AAT_AGENT_TOKEN; opens no database",
    )
    add_common(p)

    p = sub.add_parser("worker", help="run approved jobs (more executors, any host)")
    add_common(p)


def _add_tool_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`aat run`, `aat check` and `aat surface`: tools run, checked and published."""
    p = sub.add_parser("run", help="run a tool action; irreversible ones wait for approval")
    p.add_argument("tool")
    p.add_argument("action", nargs="?")
    p.add_argument("--agent", action="store_true", help="TOOL names an agent")
    p.add_argument("--no-wait", action="store_true", help="queue and return at once")
    add_common(p)

    p = sub.add_parser("check", help="validate every manifest; exit 1 on errors")
    add_common(p, db=False)

    p = sub.add_parser("surface", help="publish the chat surface (chat_surface.yaml)")
    p.add_argument("op", choices=["export"])
    p.add_argument("--out", default="server.json", help="file to write; - for stdout")
    p.add_argument("--url", help="public URL of /mcp/chat, listed under remotes")
    add_common(p, db=False)


def _add_people_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`aat operator` and `aat agent`: who may decide, and who may ask."""
    p = sub.add_parser("operator", help="manage dashboard operators")
    p.add_argument("op", choices=["add", "list", "remove", "role", "password"])
    p.add_argument("name", nargs="?")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    p.add_argument(
        "--role",
        choices=["admin", "approver", "viewer"],
        help="add: what the operator may do (default approver; the first operator is admin); "
        "role: the new role",
    )
    add_common(p, registry=False)

    p = sub.add_parser("agent", help="manage agent tokens for /mcp")
    p.add_argument("op", choices=["add", "list", "revoke"])
    p.add_argument("name", nargs="?")
    p.add_argument("--owner", metavar="OPERATOR", help="the operator the agent acts for")
    add_common(p, registry=False)


def _add_host_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`aat service`, `aat keys`, `aat audit` and `aat config`: the installation, its
    signing key and audit trail, and the MCP clients' configuration."""
    p = sub.add_parser("service", help="install aat as a systemd service under its own user")
    p.add_argument("op", choices=["install"])
    p.add_argument("--user", default="aat", help="the system user that runs aat (default aat)")
    p.add_argument("--port", type=port, default=8000)
    p.add_argument("--dry-run", action="store_true", help="print what it would do; change nothing")
    p.add_argument("--home", default="/var/lib/aat", help=argparse.SUPPRESS)
    p.add_argument("--unit-dir", default="/etc/systemd/system", help=argparse.SUPPRESS)

    p = sub.add_parser("keys", help="the dashboard's decision-signing key")
    p.add_argument("op", choices=["show"], help="show: print the public key, one line")

    p = sub.add_parser("audit", help="check, export or follow the hash-chained audit trail")
    p.add_argument("op", choices=["verify", "export", "tail"])
    p.add_argument("--since", metavar="ISO", help="export, tail: only events at or after this time")
    p.add_argument(
        "--follow", action="store_true", help="tail: keep printing events as they are appended"
    )
    add_common(p, registry=False)

    p = sub.add_parser("rules", help="rules that decide calls in advance (SPEC §16)")
    p.add_argument("op", choices=["list", "add", "revoke", "export"])
    p.add_argument("target", nargs="?", metavar="FILE|ID", help="add: a YAML or .cedar file")
    p.add_argument("--by", metavar="ADMIN", help="add, revoke: the admin making the change")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    add_common(p)

    p = sub.add_parser("servers", help="upstream MCP servers aat stands in front of (SPEC §22)")
    p.add_argument("op", choices=["list", "show", "accept", "import"])
    p.add_argument("target", nargs="?", metavar="NAME|FILE", help="the server, or import's FILE")
    p.add_argument("--by", metavar="ADMIN", help="accept: the admin accepting")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    p.add_argument("--into", metavar="ROOT", help="import: the registry root to write into")
    add_common(p)

    p = sub.add_parser("config", help="print ready-to-paste MCP client configuration")
    p.add_argument("client", choices=["opencode", "claude", "codex", "gemini"])
    p.add_argument("--surface", choices=["generic", "chat"], default="generic")
    p.add_argument("--url", help="a running `aat serve`'s /mcp: print the block for that mode")
    p.add_argument(
        "--sign-in",
        action="store_true",
        help="with --url: the plain remote block, for clients that sign in through the browser",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `aat` console script; returns the exit code."""
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    parser = build_parser()
    ns, extra = parser.parse_known_args(argv)
    if extra and ns.command != "run":
        parser.error(f"unrecognised arguments: {' '.join(extra)}")
    if ns.command in ("serve", "worker"):
        # Long-running services say what they do; one-shot commands print only their answer.
        logging.getLogger().setLevel(logging.INFO)
        logging.getLogger("alembic").setLevel(logging.WARNING)
    handler = handler_for(ns.command)
    # Imported once the arguments parse: `aat --help` and a mistyped command need no settings.
    from webplatform.config import DatabaseUnreachable, HomeUnavailable, SettingsError, get_settings
    from webplatform.keyfiles import KeyFileError

    try:
        get_settings()  # every command refuses settings that cannot work, used or not
        return handler(ns, extra)
    except SettingsError as exc:
        print(f"aat {ns.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except (HomeUnavailable, KeyFileError, DatabaseUnreachable) as exc:
        print(f"aat {ns.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # `aat run ... | head`: the reader left; say nothing more on a closed pipe.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return EXIT_FAILED
