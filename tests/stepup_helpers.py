"""Step-up proofs for tests that decide in Python, as the dashboard makes them after it has
checked the operator's password (tests/dashboard and tests/browser check it over HTTP)."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.registry import RegistryLoader
from webplatform.registry.model import Registry
from webplatform.registry.validation import with_defaults
from webplatform.store import previews as preview_rows
from webplatform.store.engine import session_scope
from webplatform.trust.stepup import StepUp, StepUpMethod


def password_step_up(
    operator: str, *, name: str, action: str, args: dict[str, Any], kind: str = "tool"
) -> StepUp:
    """The proof for running this exact call from the run form: bound, as the form binds it,
    to the call as it will run (an example tool's defaults filled in, SPEC §20)."""
    tool = _examples().tools.get(name)
    act = tool.action(action) if tool is not None else None
    ran = with_defaults(act, args) if act is not None else args
    digest = args_digest(kind=kind, name=name, action=action, args=ran)
    return StepUp(operator=operator, digest=digest, method=StepUpMethod.password)


def job_step_up(platform: Platform, job_id: int, operator: str) -> StepUp:
    """The proof for approving queued job `job_id` as it stands now, once its preview (if its
    action has one) has landed: an operator decides on a card that shows it, and an approval
    given while it was pending binds "pending", which the worker's run of the preview before
    the run never matches (SPEC §20)."""
    preview_landed(platform, job_id)
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return StepUp(operator=operator, digest=job.args_digest, method=StepUpMethod.password)


def preview_landed(platform: Platform, job_id: int, timeout_s: float = 30) -> None:
    """Wait until job `job_id`'s preview is no longer pending (at once when it has none)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with session_scope(platform.engine, write=False) as session:
            row = preview_rows.preview_of(session=session, job_id=job_id)
            if row is None or row.state != preview_rows.PENDING:
                return
        time.sleep(0.02)


@cache
def _examples() -> Registry:
    return RegistryLoader([EXAMPLES_ROOT]).load()
