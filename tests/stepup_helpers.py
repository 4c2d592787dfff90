"""Step-up proofs for tests that decide in Python, as the dashboard makes them after it has
checked the operator's password (tests/dashboard and tests/browser check it over HTTP)."""

from __future__ import annotations

from typing import Any

from webplatform.canonical import args_digest
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.store.engine import session_scope
from webplatform.trust.stepup import StepUp, StepUpMethod


def password_step_up(
    operator: str, *, name: str, action: str, args: dict[str, Any], kind: str = "tool"
) -> StepUp:
    """The proof for running this exact call from the run form."""
    digest = args_digest(kind=kind, name=name, action=action, args=args)
    return StepUp(operator=operator, digest=digest, method=StepUpMethod.password)


def job_step_up(platform: Platform, job_id: int, operator: str) -> StepUp:
    """The proof for approving queued job `job_id` as it stands now."""
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id)
        assert job is not None
        return StepUp(operator=operator, digest=job.args_digest, method=StepUpMethod.password)
