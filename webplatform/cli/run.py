"""`aat run`: one tool action from the command line; irreversible ones wait for approval."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from webplatform.cli.common import print_answer, settings_from
from webplatform.jobs.answers import Answer, Refusal, Status, answered
from webplatform.registry.model import RunnableKind


def split_run_args(extra: list[str]) -> dict[str, str]:
    """Parse `--name value`, `--name=value` and bare `--flag` pairs; `ValueError` (one line)
    otherwise."""
    raw: dict[str, str] = {}
    i = 0
    while i < len(extra):
        token = extra[i]
        if not token.startswith("--") or token == "--":
            raise ValueError(
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
    from webplatform.jobs import previews, resolution, services
    from webplatform.jobs.tracking import wait_for_job
    from webplatform.platform import Actor, Platform
    from webplatform.registry.validation import parse_text_args
    from webplatform.store.models import Surface

    settings = settings_from(ns)
    platform = Platform(settings)
    kind: RunnableKind = "agent" if ns.agent else "tool"
    try:
        raw = split_run_args(extra)
    except ValueError as exc:
        return print_answer(Answer(Status.invalid, tool=ns.tool, error=str(exc)))
    try:
        _spec, action = resolution.resolve_call(platform.registry(), kind, ns.tool, ns.action)
    except Refusal as refusal:
        return print_answer(refusal.answer)
    args, problems = parse_text_args(action, raw)
    if problems:
        return print_answer(
            Answer(
                Status.invalid,
                tool=ns.tool,
                action=action.name,
                error=problems.line,
                schema=resolution.action_schema(action),
            )
        )
    actor = Actor(surface=Surface.cli, client=f"aat run ({getpass.getuser()})", cwd=Path.cwd())
    answer = answered(
        services.request_run,
        platform=platform,
        call=services.RunCall(kind=kind, name=ns.tool, action=action.name, args=args),
        actor=actor,
        consent=services.Consent.QUEUE,
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
    code = print_answer(answer)
    # The answer is out; the queued call's preview (SPEC §16) still runs in this process,
    # which would stop it on exit: let it finish first.
    sys.stdout.flush()
    previews.wait_all(settings.preview_timeout_s + 5)
    return code
