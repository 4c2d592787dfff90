"""`aat check`, `aat surface`, `aat config`, `aat operator`: one-shot administration."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from webplatform.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, settings_from
from webplatform.registry import RegistryLoader
from webplatform.registry.limits import ceilings
from webplatform.registry.servers import ServerLoader

if TYPE_CHECKING:
    from webplatform.platform import Platform
    from webplatform.store.models import OperatorPublic


def cmd_check(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Validate every manifest under the registry roots."""
    settings = settings_from(ns)
    registry = RegistryLoader(settings.registry_roots, ceilings=ceilings(settings)).load()
    servers, server_errors = ServerLoader(settings.registry_roots).load()
    registry = replace(registry, errors=(*registry.errors, *server_errors))
    for kind, items in (("tool", registry.tools), ("agent", registry.agents)):
        for name, spec in sorted(items.items()):
            print(f"ok     {kind:5} {name} ({len(spec.actions)} actions)")
    for name, server in sorted(servers.items()):
        print(f"ok     server {name} ({'http' if server.url else 'stdio'})")
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

    settings = settings_from(ns)
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
    """Print the MCP client configuration block for opencode, Claude Code, Codex or Gemini CLI."""
    from webplatform.mcp import client_config

    if ns.url and ns.surface != "generic":
        print(
            "aat config --url: the chat surface is served at /mcp/chat; give that URL "
            "without --surface",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if ns.sign_in and not ns.url:
        print(
            "aat config --sign-in: give --url URL, the /mcp of the running `aat serve` the "
            "client signs in to",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if ns.client in ("codex", "gemini"):
        if ns.surface != "generic":
            print(f"aat config {ns.client}: only the generic surface", file=sys.stderr)
            return EXIT_USAGE
        wait_s = settings_from(ns).approval_wait_s
        if ns.client == "codex":
            block_toml = client_config.config_codex(
                approval_wait_s=wait_s, url=ns.url, sign_in=ns.sign_in
            )
            print(block_toml, end="")
        else:
            block = client_config.config_gemini(
                approval_wait_s=wait_s, url=ns.url, sign_in=ns.sign_in
            )
            print(json.dumps(block, indent=2))
        return EXIT_OK
    opencode = ns.client == "opencode"
    if ns.url and ns.sign_in:
        plain = client_config.sign_in_opencode if opencode else client_config.sign_in_claude
        print(json.dumps(plain(ns.url), indent=2))
        return EXIT_OK
    if ns.url:
        remote = client_config.remote_opencode if opencode else client_config.remote_claude
        print(json.dumps(remote(ns.url), indent=2))
        return EXIT_OK
    config = client_config.config_opencode if opencode else client_config.config_claude
    print(json.dumps(config(ns.surface), indent=2))
    return EXIT_OK


def cmd_operator(ns: argparse.Namespace, _extra: list[str]) -> int:
    """Add, list or remove dashboard operators, or set one's role or password.

    Rows are signed with the decision key in `AAT_HOME` (this OS user holds it, and with it
    every power a dashboard step-up guards, so none is asked for here)."""
    from webplatform.platform import Platform
    from webplatform.trust.authority import OPERATORS_FILE, remember

    platform = Platform(settings_from(ns))
    if ns.op == "list":
        rows = platform.operators.listed()
        for op in rows:
            print(_operator_line(op))
        return EXIT_OK
    if not ns.name:
        print(f"aat operator {ns.op}: give the operator's NAME", file=sys.stderr)
        return EXIT_USAGE
    if ns.op == "remove":
        removed = platform.operators.remove(ns.name)
        if not removed:
            print(f"no operator {ns.name!r}; `aat operator list` shows them", file=sys.stderr)
            return EXIT_FAILED
        print(f"removed operator {ns.name}")
        return EXIT_OK
    try:
        _change_operator(platform, ns)
    except ValueError as exc:
        print(f"aat operator {ns.op}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    remember(platform, OPERATORS_FILE)
    role = platform.operators.role_of(ns.name)
    done = {"add": "added operator", "role": "operator", "password": "new password for"}
    print(f"{done[ns.op]} {ns.name} ({role})")
    return EXIT_OK


def _operator_line(op: OperatorPublic) -> str:
    flag = "" if op.signed else "\tunsigned: counts as absent (re-add it)"
    return f"{op.name}\t{op.role}{flag}"


def _change_operator(platform: Platform, ns: argparse.Namespace) -> None:
    """`add`, `role` or `password`: ValueError (one line) when refused."""
    if ns.op == "role":
        if not ns.role:
            raise ValueError("give the new role with --role admin|approver|viewer")
        platform.operators.set_role(ns.name, ns.role, actor="cli")
        return
    password = _read_password(ns)
    if ns.op == "password":
        platform.operators.set_password(ns.name, password, actor="cli")
        return
    platform.operators.add(ns.name, password, role=ns.role)


def _read_password(ns: argparse.Namespace) -> str:
    if ns.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return getpass.getpass(f"password for {ns.name}: ")
