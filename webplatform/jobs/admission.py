"""Admission: the bounds a call must fit before it may wait in the approval queue.

Checked before anything is recorded, so an agent cannot fill the database or the queue:
the arguments' size (`AAT_MAX_ARGS_BYTES`) and each requester's share of pending calls
(`AAT_MAX_PENDING`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlmodel import Session

from webplatform.canonical import canonical_json
from webplatform.config import Settings
from webplatform.jobs.answers import Refusal, Status
from webplatform.platform import Actor
from webplatform.store.queries import count_pending_from


def args_too_big(*, settings: Settings, args: Any) -> str | None:
    """Why `args` are too large to accept (canonical JSON over AAT_MAX_ARGS_BYTES), or None."""
    limit = settings.max_args_bytes
    try:
        size = len(canonical_json(args).encode("utf-8"))
    except (TypeError, ValueError):
        return None  # not JSON at all: validation says what is wrong
    if size <= limit:
        return None
    return (
        f"arguments are {size} bytes of JSON, over the {limit}-byte limit (AAT_MAX_ARGS_BYTES); "
        "pass large content as a file path or in smaller calls"
    )


def over_pending_limit(
    *, settings: Settings, actor: Actor, tool: str, action: str
) -> Callable[[Session], None]:
    """A check, run in the transaction that queues the job (a call of `tool`'s `action`): it
    raises `Refusal` (`refused`) when this requester may not queue another call
    (`AAT_MAX_PENDING` already waiting)."""
    limit = settings.max_pending
    # The agent token when the call carried one; else the client's own name, the only other
    # identity a client has (it is self-reported, so a client that renames itself gets a
    # new share: the approvals page still reaches every card).
    requester = actor.operator or actor.agent or actor.client

    def check(session: Session) -> None:
        waiting = count_pending_from(session=session, surface=actor.surface, requested_by=requester)
        if waiting < limit:
            return
        who = f"{requester!r} via {actor.surface.value}" if requester else actor.surface.value
        raise Refusal(
            Status.refused,
            tool=tool,
            action=action,
            error=f"{who} already has {waiting} calls waiting for approval, the limit "
            f"(AAT_MAX_PENDING={limit}); ask again once an operator has approved or denied "
            "some of them on the dashboard's approvals page, or they have expired",
        )

    return check
