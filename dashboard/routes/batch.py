"""Deciding several queued calls at once (SPEC §16): **Approve selected** and **Deny selected**.

The cards' checkboxes (`name=job`, the job id), hidden digests (`digest_<id>`, as the card
showed them) and the digests of the previews they showed (`preview_<id>`, SPEC §20) belong to
the batch form (`form="batch"`). Approving takes one step-up, bound to
exactly that set of (job id, digest) pairs (`webplatform.trust.stepup.batch_digest`), so a
passkey confirmation for one set approves no other; each job is then approved on its own, at
its own digest, through the same path as a single Approve. Denying takes no step-up, as a
single Deny does. A job that changed, expired or was decided meanwhile is refused alone, with
its own line in the notice, while the others go through.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.responses import Response

from dashboard import data, stepup
from dashboard.deps import AddressDep, CheckerDep, DeciderDep, DenierDep, View, ViewDep
from dashboard.render import Notice
from dashboard.routes.approvals import render_queue
from webplatform.jobs import decisions
from webplatform.jobs import states as jobs
from webplatform.jobs.decisions import Outcome
from webplatform.platform import Platform
from webplatform.store.models import JobState
from webplatform.trust import claims, door
from webplatform.trust.stepup import StepUpMismatch

router = APIRouter()
NONE_CHOSEN = "no call was selected: tick the box of each call to decide, then try again"
# At most this many calls in one batch (a page of the queue holds fewer).
MAX_BATCH = 100


class NotChosen(ValueError):
    """The form chose no call, or chose them in a way no page would (the message says)."""


def chosen_of(form: FormData) -> list[tuple[int, str]]:
    """The (job id, digest) pairs the form chose, in the page's order, each once; raises
    NotChosen when there are none, too many, or a box came without its card's digest."""
    chosen: dict[int, str] = {}
    for value in form.getlist("job"):
        if not isinstance(value, str) or not value.isdigit():
            raise NotChosen(f"{value!r} is not a job id: reload the approvals page")
        digest = form.get(f"digest_{value}")
        if not isinstance(digest, str) or not digest.strip():
            raise NotChosen(f"job {value} came without the digest its card showed: reload the page")
        chosen.setdefault(int(value), digest.strip())
    if not chosen:
        raise NotChosen(NONE_CHOSEN)
    if len(chosen) > MAX_BATCH:
        raise NotChosen(f"at most {MAX_BATCH} calls at once: select fewer")
    return list(chosen.items())


def previews_of(form: FormData, chosen: list[tuple[int, str]]) -> dict[int, str]:
    """The digest of the preview each chosen card showed (`preview_<id>`, SPEC §20), for the
    cards that showed one."""
    shown = {job_id: form.get(f"preview_{job_id}") for job_id, _ in chosen}
    return {job_id: value for job_id, value in shown.items() if isinstance(value, str)}


def line_for(platform: Platform, outcome: Outcome) -> tuple[bool, str]:
    """(decided?, the notice's line for this job): what happened, or why it was refused."""
    job_id, job, exc = outcome.job_id, outcome.job, outcome.refused
    if job is not None:
        if job.state is JobState.pending_approval:
            return True, f"job {job_id}: your approval is recorded; it waits for more approvals"
        return True, f"job {job_id}: {job.state.value}"
    return False, f"job {job_id}: {_why(platform, job_id, exc)}"


def _why(platform: Platform, job_id: int, exc: Exception | None) -> str:
    """Why job `job_id` was left as it was, in a few words."""
    if isinstance(exc, jobs.PreviewChanged):
        return "its preview changed since the page showed it, not decided: review it again"
    if isinstance(exc, jobs.DigestMismatch):
        return "changed since the page showed it, not decided: review it again"
    if isinstance(exc, jobs.ApprovalExpired) or (
        isinstance(exc, jobs.StaleState) and exc.actual is JobState.expired
    ):
        return "expired, not approved"
    if isinstance(exc, jobs.JobNotFound):
        return "no such job"
    if isinstance(exc, jobs.StaleState):
        edited = _edited_into(platform, job_id)
        if edited is not None:
            return f"edited by {exc.decided_by} into job {edited}, not decided: review that one"
        if exc.unsigned:  # nobody approved it: its row was written outside aat
            return f"{claims.UNSIGNED_APPROVAL}, not decided"
        by = f" by {exc.decided_by}" if exc.decided_by else ""
        return f"already {exc.actual.value}{by}, not decided"
    return f"not decided: {exc}"


def _edited_into(platform: Platform, job_id: int) -> int | None:
    """The job an edit of `job_id` made, if it was edited."""
    edited = platform.jobs.edited_into(job_id)
    return edited.id if edited is not None else None


async def _run(
    view: View, decide: Callable[[], list[Outcome]], gone: list[tuple[bool, str]]
) -> Response:
    """Decide, then answer with the notice, one line per job: 200 when any was decided,
    409 when none was, 403 when the step-up was refused (then none was tried)."""

    def lines() -> list[tuple[bool, str]]:
        return [line_for(view.platform, outcome) for outcome in decide()] + gone

    try:
        said = await run_in_threadpool(lines)
    except (stepup.StepUpRefused, StepUpMismatch) as exc:
        return render_queue(view, Notice.refused(str(exc), 403), block="notice")
    status_code = 200 if any(decided for decided, _ in said) else 409
    return render_queue(view, Notice(status=status_code), lines=said, block="notice")


@router.post("/approvals/approve")
async def approve_selected(
    view: ViewDep, checker: CheckerDep, operator: DeciderDep, address: AddressDep
) -> Response:
    """Approve the selected calls with one step-up bound to exactly that set."""
    form = await view.request.form()
    try:
        chosen = chosen_of(form)
    except NotChosen as exc:
        return _not_chosen(view, form, exc)
    proof = stepup.Proof(password=_text(form, "password"), passkey=_text(form, "passkey"))

    def decide() -> list[Outcome]:
        return door.decide(
            checker,
            operator=operator,
            proof=proof,
            bound=stepup.for_batch(operator, chosen),
            address=address,
            record=lambda step_up: decisions.approve_batch(
                platform=view.platform,
                operator=operator,
                chosen=chosen,
                address=address,
                step_up=step_up,
                previews=previews_of(form, chosen),
            ),
        )

    return await _run(view, decide, _gone(view, form))


@router.post("/approvals/deny")
async def deny_selected(view: ViewDep, operator: DenierDep, address: AddressDep) -> Response:
    """Deny the selected calls with the one reason given (no step-up, as a single Deny)."""
    form = await view.request.form()
    try:
        chosen = chosen_of(form)
    except NotChosen as exc:
        return _not_chosen(view, form, exc)

    def decide() -> list[Outcome]:
        return decisions.deny_batch(
            platform=view.platform,
            operator=operator,
            job_ids=[job_id for job_id, _ in chosen],
            reason=_text(form, "reason"),
            address=address,
        )

    return await _run(view, decide, _gone(view, form))


def _not_chosen(view: View, form: FormData, exc: NotChosen) -> Response:
    """The refusal of a form that chose nothing: when the calls ticked all left the queue
    before the press, their lines say so (`_gone`), not "no call was selected"."""
    gone = _gone(view, form) if str(exc) == NONE_CHOSEN else []
    if not gone:
        return render_queue(view, Notice.refused(str(exc), 422), block="notice")
    return render_queue(view, Notice(status=409), lines=gone, block="notice")


def _gone(view: View, form: FormData) -> list[tuple[bool, str]]:
    """A line for each call the operator ticked that left the queue before they pressed
    (decided by someone else, expired): the page's script names them (`gone`), since their
    boxes left with their cards."""
    ids = [int(v) for v in _text(form, "gone").split(",") if v.strip().isdigit()]
    viewer = getattr(view.request.state, "operator", "")
    outcomes = data.outcomes(view.platform, ids, viewer) if ids else []
    return [(False, f"job {o.job.id}: {_gone_line(o)}, not decided") for o in outcomes]


def _gone_line(outcome: data.Outcome) -> str:
    if outcome.fate in ("expired", "withdrawn"):
        return outcome.fate
    who = "someone else" if outcome.by_someone_else else "you"
    return f"already decided by {who} ({outcome.fate} by {outcome.job.decided_by})"


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""
