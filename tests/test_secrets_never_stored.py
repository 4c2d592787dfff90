"""Secrets never reach the database or an answer, even when a tool prints them back."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from webplatform.config import Settings
from webplatform.jobs import decisions
from webplatform.jobs.answers import Status
from webplatform.jobs.services import Consent, request_run
from webplatform.jobs.tracking import job_answer
from webplatform.mcp.results import answer_result
from webplatform.platform import Actor, Platform
from webplatform.store.models import Surface

TESTS_ROOT = Path(__file__).parent  # tests/tools/* is a registry root of fixture tools
AGENT = Actor(surface=Surface.mcp_stdio, client="test-agent")
OPERATOR = Actor(surface=Surface.dashboard, operator="ada")
ARG_SECRET = "arg-secret-Žluťoučký-4711"
ENV_SECRET = "env-secret-0815-token"


@pytest.fixture
def platform_settings(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The test tools, with the secret the `echo` tool declares set in the environment."""
    monkeypatch.setenv("ECHO_TOKEN", ENV_SECRET)
    return settings.model_copy(update={"registry": str(TESTS_ROOT)})


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
        consent=Consent.NONE,
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
        consent=Consent.NONE,
    )
    again = decisions.rerun(platform=platform, job_id=first.job or 0, actor=OPERATOR)
    assert again.status is Status.invalid
    assert "secret argument(s) token" in (again.error or "")


LEAK_SECRET = "SECRET-Zx7Kd9mW2vB5nR8tY4jL6hJ3dF0c"  # 35 characters, as measured
INSIDE = 16  # characters of the secret a cut would keep


def _pieces(secret: str, size: int = 4) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


# Each case puts the secret across one cut: the padding before (or after) it is chosen so
# that the cut falls INSIDE characters into the secret.
STRADDLES = {
    # "exit 1: " + the tool's error, clipped to 499 characters and an ellipsis.
    "error line": {"where": "error", "pad": 499 - len("exit 1: ") - INSIDE},
    # The runner keeps the first 1 000 000 bytes of stdout.
    "stdout cap": {"where": "stdout", "pad": 1_000_000 - INSIDE},
    # The runner keeps the last 1 000 000 bytes of stderr.
    "stderr tail": {"where": "stderr", "pad": 0, "after": 1_000_000 - INSIDE},
    # An answer carries the last 2000 characters of stderr.
    "answer's stderr tail": {"where": "stderr", "pad": 0, "after": 2000 - INSIDE},
    # An MCP result over AAT_RESULT_MAX_BYTES has its strings clipped (first to a quarter).
    "MCP result cap": {"where": "result", "pad": 20_000 // 4 - INSIDE, "after": 30_000},
}


@pytest.mark.parametrize("case", list(STRADDLES))
def test_no_part_of_a_secret_survives_a_cut(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.setenv("LEAK_TOKEN", LEAK_SECRET)
    answer = request_run(
        platform=platform,
        kind="tool",
        name="leak",
        action="leak",
        args=STRADDLES[case],
        actor=AGENT,
        consent=Consent.NONE,
    )
    assert answer.job is not None, answer
    shown = everything_stored(platform) + repr(answer.to_dict())
    shown += repr(answer_result(answer, max_bytes=20_000).model_dump())
    leaked = [piece for piece in _pieces(LEAK_SECRET) if piece in shown]
    assert not leaked, f"{case}: {len(leaked)} pieces of the secret were left after the cut"
