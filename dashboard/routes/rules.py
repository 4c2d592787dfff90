"""The Rules page (SPEC §16): admins write rules that decide calls in advance, see what each
allows and how often it ran, and revoke them.

Making a rule gives calls an approval nobody typed, so it needs the admin's step-up bound
to exactly that text (their password typed with it); revoking takes rights away, and needs
the step-up too, as `aat rules revoke` does (SPEC §16).
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Form
from starlette.responses import Response

from dashboard import stepup
from dashboard.deps import AddressDep, CheckerDep, RuleMakerDep, View, ViewDep
from dashboard.forms import ProofForm, RulesForm
from dashboard.render import QUIET, Notice
from webplatform.jobs import ruling
from webplatform.platform import Platform
from webplatform.trust import door, rulebook
from webplatform.trust.rules import Rule, RuleError
from webplatform.trust.stepup import Change, StepUpMismatch

router = APIRouter()

EXAMPLE = """- effect: allow
  tool: outbox
  action: send-message
  args: {to: "*@example.org"}
  expires_in: 1h
  max_runs: 20
"""


def render_rules(
    view: View,
    notice: Notice = QUIET,
    *,
    text: str = "",
) -> Response:
    """Every rule (newest first, forged ones marked) and the form to write more."""
    rules = rulebook.listing(view.platform)
    context: dict[str, Any] = {"rules": rules, **notice.shown()}
    # The example is the field's placeholder, never its value: a form that submitted as it
    # came would make a working allow rule (SPEC §25).
    hours = view.platform.settings.rule_max_hours
    context |= {"text": text, "example": EXAMPLE, "max_hours": hours}
    return view.pages.render(view.request, "rules.html", context, status_code=notice.status)


@router.get("/rules")
def rules_page(view: ViewDep, _admin: RuleMakerDep) -> Response:
    """The rules and the form to make one."""
    return render_rules(view)


def _text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def keep_rules(platform: Platform, rules: list[Rule], *, by: str) -> list[int]:
    """Keep `rules` (checked by `rulebook.parse`), made by admin `by` after their step-up,
    and have this process read the rules afresh; their ids. The Rules page and the card's
    Approve and allow similar both make rules through here."""
    ids = rulebook.add(platform, rules, by=by)
    ruling.forget(platform)
    return ids


@router.post("/rules")
def add_rules(
    view: ViewDep,
    checker: CheckerDep,
    admin: RuleMakerDep,
    address: AddressDep,
    form: Annotated[RulesForm, Form()],
) -> Response:
    """Check, confirm (step-up bound to this text) and keep the rules the text holds."""
    source = rulebook.Source(text=form.text, cedar=form.form == "cedar")
    try:
        rules = rulebook.parse(source, view.platform)
        stepup.verify(
            checker,
            operator=admin,
            proof=form.proof(),
            bound=stepup.for_change(admin, Change.rule_add, {"text": _text_digest(form.text)}),
            address=address,
        )
    except RuleError as exc:
        return render_rules(view, Notice.refused(str(exc), 422), text=form.text)
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return render_rules(view, Notice.refused(str(exc), 403), text=form.text)
    ids = keep_rules(view.platform, rules, by=admin)
    made = ", ".join(str(i) for i in ids)
    return render_rules(view, Notice(f"Made rule(s) {made}."))


@router.post("/rules/{rule_id}/revoke")
def revoke_rule(
    view: ViewDep,
    checker: CheckerDep,
    admin: RuleMakerDep,
    address: AddressDep,
    rule_id: int,
    form: Annotated[ProofForm, Form()],
) -> Response:
    """Revoke a rule, confirmed with the admin's step-up for exactly this rule."""
    try:
        door.decide(
            checker,
            operator=admin,
            proof=form.proof(),
            bound=stepup.for_change(admin, Change.rule_revoke, {"rule": str(rule_id)}),
            address=address,
            record=lambda _step_up: rulebook.revoke(view.platform, rule_id, by=admin),
        )
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return render_rules(view, Notice.refused(str(exc), 403))
    except RuleError as exc:
        return render_rules(view, Notice.refused(str(exc), 409))
    ruling.forget(view.platform)
    return render_rules(view, Notice(f"Revoked rule {rule_id}."))
