"""Changes of who may decide, made from the dashboard: a role, a password, an agent token, a
removed passkey. Only the dashboard imports this module.

Each takes the `StepUp` the dashboard verified (the operator's password typed with the
change, or a passkey assertion over a challenge bound to it) and refuses it unless it is the
acting operator's, for exactly this change (`webplatform.trust.stepup.change_digest`): a session
cookie alone changes nothing. Registering a passkey is gated the same way, before its
challenge is issued (`dashboard.passkeys.registration_options`). The rows are signed anew
(`webplatform.store.seals`). The command line changes the same rows without a step-up: its
OS user holds the signing key, and with it every power these checks guard.
"""

from __future__ import annotations

from collections.abc import Mapping

from webplatform.platform import Platform
from webplatform.store.models import AgentTokenPublic
from webplatform.trust.authority import TOKENS_FILE, remember
from webplatform.trust.stepup import Change, StepUp, change_digest, check_step_up


def check_change(step_up: StepUp, *, by: str, change: Change, target: Mapping[str, str]) -> None:
    """Raise `StepUpMismatch` unless `step_up` is `by`'s proof for exactly this change."""
    digest = change_digest(operator=by, change=change, target=target)
    check_step_up(step_up, operator=by, digest=digest)


def set_role(*, platform: Platform, step_up: StepUp, by: str, name: str, role: str) -> None:
    """Give operator `name` the role `role` (an admin's change); OperatorError if refused."""
    check_change(step_up, by=by, change=Change.role, target={"operator": name, "role": role})
    platform.operators.set_role(name, role, actor=by)


def set_password(*, platform: Platform, step_up: StepUp, by: str, password: str) -> None:
    """Replace `by`'s own password (which logs out their sessions); OperatorError if refused."""
    check_change(step_up, by=by, change=Change.password, target={})
    platform.operators.set_password(by, password, actor=by)


def mint_agent(
    *, platform: Platform, step_up: StepUp, by: str, name: str
) -> tuple[AgentTokenPublic, str]:
    """Mint agent token `name` owned by `by`; the token is returned once. AgentTokenError if
    the name is bad or taken."""
    check_change(step_up, by=by, change=Change.agent_add, target={"name": name})
    minted = platform.tokens.mint(name, by, actor=by)
    remember(platform, TOKENS_FILE)
    return minted


def remove_passkey(*, platform: Platform, step_up: StepUp, by: str, passkey_id: int) -> bool:
    """Remove one of `by`'s passkeys; False if they have none with this id."""
    check_change(step_up, by=by, change=Change.passkey_remove, target={"passkey": str(passkey_id)})
    return platform.passkeys.remove(by, passkey_id)
