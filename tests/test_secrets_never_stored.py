"""Secrets never reach the database or an answer, even when a tool prints them back."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from webplatform import decisions
from webplatform.answers import Status
from webplatform.config import Settings
from webplatform.platform import Actor, Platform
from webplatform.services import request_run
from webplatform.store.models import Surface
from webplatform.tracking import job_answer

TESTS_ROOT = Path(__file__).parent  # tests/tools/* is a registry root of fixture tools
AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")
OPERATOR = Actor(surface=Surface.dashboard, operator="ada")
ARG_SECRET = "arg-secret-Žluťoučký-4711"
ENV_SECRET = "env-secret-0815-token"


@pytest.fixture
def platform(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Platform:
    monkeypatch.setenv("ECHO_TOKEN", ENV_SECRET)
    return Platform(settings.model_copy(update={"registry": str(TESTS_ROOT)}))


def everything_stored(platform: Platform) -> str:
    with platform.engine.connect() as conn:
        jobs = conn.execute(text("SELECT * FROM job")).all()
        events = conn.execute(text("SELECT * FROM audit_event")).all()
    return repr(jobs) + repr(events)


def test_secret_argument_and_secret_env_are_masked_everywhere(platform: Platform) -> None:
    answer = request_run(
        platform=platform,
        kind="tool",
        name="echo",
        action="echo",
        args={"text": "hi", "token": ARG_SECRET},
        actor=AGENT,
        confirmed=False,
    )
    assert answer.status is Status.succeeded
    # The tool really got both values (it echoes argv and env) ...
    assert "***" in answer.result["argv"]
    assert answer.result["env"]["ECHO_TOKEN"] == "***"
    # ... and neither reached the database or the answer.
    stored = everything_stored(platform)
    again = repr(job_answer(platform=platform, job_id=answer.job or 0).to_dict())
    for secret in (ARG_SECRET, ENV_SECRET):
        assert secret not in stored
        assert secret not in again
        assert secret not in repr(answer.to_dict())


def test_a_job_with_a_secret_argument_cannot_be_rerun_with_the_mask(platform: Platform) -> None:
    first = request_run(
        platform=platform,
        kind="tool",
        name="echo",
        action="echo",
        args={"token": ARG_SECRET},
        actor=AGENT,
        confirmed=False,
    )
    again = decisions.rerun(platform=platform, job_id=first.job or 0, actor=OPERATOR)
    assert again.status is Status.invalid
    assert "secret argument(s) token" in (again.error or "")
