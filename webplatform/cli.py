"""`aat`: start the dashboard, the MCP bridge and workers; run, check and configure.

No command here can approve a job: `aat run` of an irreversible action goes through the
approval queue like any other request (an import-linter contract keeps this module away
from `webplatform.decisions`).
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from webplatform import __version__
from webplatform.answers import Answer, Status
from webplatform.config import Settings, get_settings
from webplatform.registry import RegistryLoader
from webplatform.registry.model import RunnableKind

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _settings(ns: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    if getattr(ns, "registry", None):
        overrides["registry"] = ":".join(ns.registry)
    if getattr(ns, "db", None):
        overrides["db_url"] = ns.db
    return get_settings(**overrides)


def _common(p: argparse.ArgumentParser, *, registry: bool = True, db: bool = True) -> None:
    if registry:
        p.add_argument(
            "--registry", action="append", metavar="DIR", help="registry root (repeatable)"
        )
    if db:
        p.add_argument("--db", metavar="URL", help="database URL (default: SQLite in AAT_HOME)")


def build_parser() -> argparse.ArgumentParser:
    """The `aat` argument parser."""
    parser = argparse.ArgumentParser(
        prog="aat", description="Local tools for AI agents, with a human approving what matters."
    )
    parser.add_argument("--version", action="version", version=f"aat {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="dashboard + /mcp endpoint + embedded worker")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--no-worker", action="store_true", help="do not embed a worker")
    _common(p)

    p = sub.add_parser("mcp", help="the MCP bridge over stdio, for MCP clients")
    p.add_argument("--surface", choices=["generic", "chat"], default="generic")
    _common(p)

    p = sub.add_parser("worker", help="run approved jobs (more executors, any host)")
    _common(p)

    p = sub.add_parser("run", help="run a tool action; irreversible ones wait for approval")
    p.add_argument("tool")
    p.add_argument("action", nargs="?")
    p.add_argument("--agent", action="store_true", help="TOOL names an agent")
    p.add_argument("--no-wait", action="store_true", help="queue and return at once")
    _common(p)

    p = sub.add_parser("check", help="validate every manifest; exit 1 on errors")
    _common(p, db=False)

    p = sub.add_parser("surface", help="publish the chat surface (chat_surface.yaml)")
    p.add_argument("op", choices=["export"])
    p.add_argument("--out", default="server.json", help="file to write; - for stdout")
    p.add_argument("--url", help="public URL of /mcp/chat, listed under remotes")
    _common(p, db=False)

    p = sub.add_parser("operator", help="manage dashboard operators")
    p.add_argument("op", choices=["add", "list", "remove"])
    p.add_argument("name", nargs="?")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    _common(p, registry=False)

    p = sub.add_parser("config", help="print ready-to-paste MCP client configuration")
    p.add_argument("client", choices=["opencode", "claude"])
    p.add_argument("--surface", choices=["generic", "chat"], default="generic")
    return parser


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
    handler = {
        "serve": cmd_serve,
        "mcp": cmd_mcp,
        "worker": cmd_worker,
        "run": cmd_run,
        "check": cmd_check,
        "surface": cmd_surface,
        "operator": cmd_operator,
        "config": cmd_config,
    }[ns.command]
    try:
        return handler(ns, extra)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `aat run ... | head`: the reader left; say nothing more on a closed pipe.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return EXIT_FAILED


def cmd_check(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Validate every manifest under the registry roots."""
    settings = _settings(ns)
    registry = RegistryLoader(settings.registry_roots).load()
    for kind, items in (("tool", registry.tools), ("agent", registry.agents)):
        for name, spec in sorted(items.items()):
            print(f"ok     {kind:5} {name} ({len(spec.actions)} actions)")
    for name in sorted(registry.skills):
        print(f"ok     skill {name}")
    for error in registry.errors:
        print(f"error  {error.kind:5} {error}")
    total = len(registry.tools) + len(registry.agents) + len(registry.skills)
    print(f"{total} loaded, {len(registry.errors)} with errors")
    from webplatform.surface import check_lines

    lines, surface_errors = check_lines(settings.registry_roots, registry)
    print("\n".join(lines))
    return EXIT_FAILED if registry.errors or surface_errors else EXIT_OK


def cmd_surface(ns: argparse.Namespace, _extra: list[str]) -> int:
    """`aat surface export`: write the chat surface's server.json (MCP registry format)."""
    from webplatform.mcp.chat import ChatSurfaceError, export_server_json

    settings = _settings(ns)
    registry = RegistryLoader(settings.registry_roots).load()
    out = None if ns.out == "-" else str(ns.out)
    try:
        document = export_server_json(
            roots=settings.registry_roots, registry=registry, out=out, url=ns.url
        )
    except ChatSurfaceError as exc:
        print(f"aat surface export: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if out is None:
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print(f"wrote {out} (surface_version {document['version']})", file=sys.stderr)
    return EXIT_OK


def cmd_config(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Print the MCP client configuration block for opencode or Claude Code."""
    from webplatform.mcp.client_config import config_claude, config_opencode

    config = config_opencode if ns.client == "opencode" else config_claude
    block = config(ns.surface)
    print(json.dumps(block, indent=2))
    return EXIT_OK


def _split_run_args(extra: list[str]) -> dict[str, str] | str:
    """`--name value`, `--name=value` and bare `--flag` pairs; an error string otherwise."""
    raw: dict[str, str] = {}
    i = 0
    while i < len(extra):
        token = extra[i]
        if not token.startswith("--") or token == "--":
            return (
                f"expected --ARG VALUE, got {token!r} "
                "(write --name=--value for a value that starts with --)"
            )
        name, eq, value = token[2:].partition("=")
        if eq:
            raw[name] = value
        elif i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            raw[name] = extra[i + 1]
            i += 1
        else:
            raw[name] = "true"
        i += 1
    return raw


def cmd_run(ns: argparse.Namespace, extra: list[str]) -> int:
    """Run one tool action from the command line and print its answer as JSON."""
    from webplatform import services
    from webplatform.platform import Actor, Platform
    from webplatform.store.models import Surface
    from webplatform.tracking import wait_for_job
    from webplatform.validation import parse_text_args

    settings = _settings(ns)
    platform = Platform(settings)
    kind: RunnableKind = "agent" if ns.agent else "tool"
    raw = _split_run_args(extra)
    if isinstance(raw, str):
        return _print_answer(Answer(Status.invalid, tool=ns.tool, error=raw))
    resolved = services.resolve_call(platform.registry(), kind, ns.tool, ns.action)
    if isinstance(resolved, Answer):
        return _print_answer(resolved)
    _spec, action = resolved
    args, problems = parse_text_args(action, raw)
    if problems:
        return _print_answer(
            Answer(
                Status.invalid,
                tool=ns.tool,
                action=action.name,
                error=problems.line,
                schema=services.action_schema(action),
            )
        )
    actor = Actor(surface=Surface.cli, client=f"aat run ({getpass.getuser()})", cwd=Path.cwd())
    answer = services.request_run(
        platform=platform,
        kind=kind,
        name=ns.tool,
        action=action.name,
        args=args,
        actor=actor,
        confirmed=True,
    )
    if answer.status is Status.pending_approval and answer.job is not None and not ns.no_wait:
        print(
            f"queued as job {answer.job}: approve or deny it at {answer.approval_url}",
            file=sys.stderr,
        )
        if answer.warning:
            print(f"warning: {answer.warning}", file=sys.stderr)
        try:
            answer = wait_for_job(
                platform=platform, job_id=answer.job, timeout_s=settings.approval_ttl_s + 60
            )
        except KeyboardInterrupt:
            print(f"stopped waiting; job {answer.job} is still queued", file=sys.stderr)
    return _print_answer(answer)


def _print_answer(answer: Answer) -> int:
    print(json.dumps(answer.to_dict(), indent=2, ensure_ascii=False))
    if answer.status is Status.invalid:
        return EXIT_USAGE
    return EXIT_FAILED if answer.is_error else EXIT_OK


def cmd_operator(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Add, list or remove dashboard operators."""
    from webplatform.platform import Platform
    from webplatform.store import operators

    platform = Platform(_settings(ns))
    if ns.op == "list":
        with platform.session() as session:
            for op in operators.list_operators(session=session):
                print(op.name)
        return EXIT_OK
    if not ns.name:
        print(f"aat operator {ns.op}: give the operator's NAME", file=sys.stderr)
        return EXIT_USAGE
    if ns.op == "remove":
        with platform.session() as session:
            removed = operators.remove_operator(session=session, name=ns.name)
        if not removed:
            print(f"no operator {ns.name!r}; `aat operator list` shows them", file=sys.stderr)
            return EXIT_FAILED
        print(f"removed operator {ns.name}")
        return EXIT_OK
    if ns.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {ns.name}: ")
    try:
        with platform.session() as session:
            operators.add_operator(session=session, name=ns.name, password=password)
    except ValueError as exc:
        print(f"aat operator add: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"added operator {ns.name}")
    return EXIT_OK


def cmd_worker(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Run approved jobs until interrupted."""
    from webplatform.platform import Platform
    from webplatform.worker import make_worker

    platform = Platform(_settings(ns))
    stop = threading.Event()
    worker = make_worker(platform)
    logging.getLogger("aat.worker").info("worker %s started", worker.worker_id)
    try:
        worker.run_forever(stop)
    except KeyboardInterrupt:
        stop.set()
    return EXIT_OK


def cmd_mcp(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Serve the MCP bridge on stdio; stdout carries protocol only."""
    from webplatform.mcp.stdio import run_stdio

    run_stdio(_settings(ns), surface=ns.surface)
    return EXIT_OK


def cmd_serve(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Serve the dashboard, `/mcp` and an embedded worker."""
    import uvicorn

    from dashboard.app import create_app
    from dashboard.setup import print_setup_link
    from webplatform.mcp.http import is_loopback
    from webplatform.platform import Platform

    settings = _settings(ns)
    if not is_loopback(ns.host) and not settings.mcp_token:
        print(
            f"aat serve: refusing to listen on {ns.host} without a bearer token for /mcp; "
            "set AAT_MCP_TOKEN (and AAT_ALLOWED_HOSTS for the dashboard's Host names)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    platform = Platform(settings)
    app = create_app(settings, platform=platform, embed_worker=not ns.no_worker)
    print_setup_link(settings, platform, host=ns.host, port=ns.port)
    uvicorn.run(app, host=ns.host, port=ns.port, log_level="info")
    return EXIT_OK
