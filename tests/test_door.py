"""The trust door (SPEC §21): one function verifies a step-up and records the decision it
confirms, for the dashboard and the command line alike."""

from __future__ import annotations

import pytest

from webplatform.platform import Platform
from webplatform.store import audit
from webplatform.store.operators import add_operator
from webplatform.trust import door
from webplatform.trust.authority import seal_for
from webplatform.trust.permissions import ROLE_BOOK
from webplatform.trust.stepup import StepUpMethod

BOUND = door.Bound(purpose="approve", digest="d" * 64, job_id=None)


@pytest.fixture
def ada(platform: Platform) -> str:
    seal = seal_for(platform)
    platform.transact(
        lambda s: add_operator(
            session=s, name="ada", password="ada-long-pw", seal=seal, roles=ROLE_BOOK
        )
    )
    return "ada"


def _refusals(platform: Platform) -> list[str]:
    entries = platform.transact(lambda s: audit.recent_events(session=s), write=False)
    return [e.detail or "" for e in entries if e.event == "step-up-refused"]


def test_a_wrong_password_records_no_decision_and_is_audited(platform: Platform, ada: str) -> None:
    recorded: list[object] = []
    with pytest.raises(door.StepUpRefused, match="wrong password"):
        door.decide(
            door.Terminal(platform),
            operator=ada,
            proof=door.Proof(password="not-her-password"),
            bound=BOUND,
            address=None,
            record=recorded.append,
        )
    assert recorded == []
    assert _refusals(platform) == ["approval refused: step-up password missing or invalid"]


def test_the_right_password_records_the_decision_with_a_step_up_bound_to_it(
    platform: Platform, ada: str
) -> None:
    step_up = door.decide(
        door.Terminal(platform),
        operator=ada,
        proof=door.Proof(password="ada-long-pw"),
        bound=BOUND,
        address=None,
        record=lambda given: given,
    )
    assert (step_up.operator, step_up.digest, step_up.method) == (
        "ada",
        BOUND.digest,
        StepUpMethod.password,
    )


def test_no_proof_and_a_terminal_passkey_are_refused(platform: Platform, ada: str) -> None:
    with pytest.raises(door.StepUpRefused, match="fresh proof"):
        door.verify(
            door.Terminal(platform), operator=ada, proof=door.Proof(), bound=BOUND, address=None
        )
    with pytest.raises(door.StepUpRefused, match="browser only"):
        door.verify(
            door.Terminal(platform),
            operator=ada,
            proof=door.Proof(passkey="{}"),
            bound=BOUND,
            address=None,
        )
    assert len(_refusals(platform)) == 2
