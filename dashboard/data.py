"""Reads for pages: what each page shows, gathered in one read-only transaction.

Reads use `write=False` sessions so the approvals page, polled every second by every open
tab, never waits behind a writer on SQLite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import Session

from dashboard.call_args import ShownArg, parse_args, shown_args
from dashboard.previews import CARD_CHARS, PreviewView, preview_view
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.registry.model import Registry
from webplatform.store import approvals, dashboard_queries, operators, queries
from webplatform.store import previews as preview_rows
from webplatform.store.clock import shared_now
from webplatform.store.models import (
    AuditEvent,
    Job,
    JobPreview,
    JobState,
    Surface,
    utcnow,
)
from webplatform.store.queries import HistoryFilter
from webplatform.store.seals import RowSeal
from webplatform.trust import claims, permissions
from webplatform.trust.authority import report_forged
from webplatform.trust.decidability import (
    POLICY_INVALID,
    Decider,
    Intent,
    Standing,
    judge,
    standing_of,
)
from webplatform.trust.ledger import REFUSAL_EVENTS

PAGE_SIZE = 50
EXPORT_LIMIT = 100_000


@dataclass(frozen=True)
class JobFilters:
    """The job history filters, as given in the query string (all optional)."""

    state: JobState | None = None
    tool: str | None = None
    surface: Surface | None = None
    since: datetime | None = None
    until: datetime | None = None
    problems: tuple[str, ...] = ()

    def history(self) -> HistoryFilter:
        """The filters as the store's history query takes them."""
        return HistoryFilter(
            state=self.state,
            name=self.tool,
            surface=self.surface,
            since=self.since,
            until=self.until,
        )

    def query(self, **extra: Any) -> str:
        """The filters as a query string (for paging and export links)."""
        from urllib.parse import urlencode

        pairs = {
            "state": self.state.value if self.state else None,
            "tool": self.tool,
            "surface": self.surface.value if self.surface else None,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            **extra,
        }
        return urlencode({k: v for k, v in pairs.items() if v not in (None, "")})


def _parse_time(text: str | None, label: str, problems: list[str]) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        problems.append(f"{label} must be a date or time like 2025-01-31 or 2025-01-31T14:00")
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_filters(
    *,
    state: str | None,
    tool: str | None,
    surface: str | None,
    since: str | None,
    until: str | None,
) -> JobFilters:
    """Filters from query-string text; bad values are reported, not fatal."""
    problems: list[str] = []
    job_state = surface_value = None
    if state:
        try:
            job_state = JobState(state)
        except ValueError:
            problems.append(f"unknown state {state!r}")
    if surface:
        try:
            surface_value = Surface(surface)
        except ValueError:
            problems.append(f"unknown surface {surface!r}")
    return JobFilters(
        state=job_state,
        tool=(tool or "").strip() or None,
        surface=surface_value,
        since=_parse_time(since, "since", problems),
        until=_parse_time(until, "until", problems),
        problems=tuple(problems),
    )


def job_page(
    *, platform: Platform, filters: JobFilters, before_id: int | None, limit: int = PAGE_SIZE
) -> list[Job]:
    """One page of job history, newest first (keyset paging on id)."""
    return platform.jobs.history(filters.history(), before_id=before_id, limit=limit)


def all_jobs(*, platform: Platform, filters: JobFilters, limit: int = EXPORT_LIMIT) -> list[Job]:
    """Every job matching the filters (up to `limit`), for exports, fetched page by page."""
    out: list[Job] = []
    before: int | None = None
    while len(out) < limit:
        page = job_page(platform=platform, filters=filters, before_id=before, limit=500)
        out.extend(page)
        if len(page) < 500:
            break
        before = page[-1].id
    return out[:limit]


def pending_count(platform: Platform) -> int:
    """How many calls wait for an operator."""
    return platform.jobs.count_pending()


CARDS_PER_PAGE = 50
# A card shows this much of a call's arguments; the job page shows all of them. Keeps the
# approvals page, re-fetched every second, small however large the arguments are.
ARGS_SHOWN_CHARS = 4000
# The audit events of an approved job a worker refused for a signature that does not verify.
FORGED_EVENTS = frozenset({"signature-invalid", POLICY_INVALID})


@dataclass(frozen=True)
class Approvals:
    """Where a pending job stands with its approvals (SPEC §11), and who may still give one."""

    # The job and who approved it so far, as the decision point judges it (None: no job).
    standing: Standing | None = None
    # How many operators could approve it at all (admins and approvers, less the asker
    # when self-approval is off).
    eligible: int = 0

    @property
    def given(self) -> tuple[str, ...]:
        """Who approved the job so far, oldest first."""
        return () if self.standing is None else self.standing.given

    @property
    def required(self) -> int:
        """How many distinct operators must approve the job."""
        return 1 if self.standing is None else self.standing.job.approvals_required

    @property
    def asker(self) -> str | None:
        """The operator who asked for the job (the run form's, or the agent token's owner)."""
        return None if self.standing is None else self.standing.job.asked_by_operator

    @property
    def self_approval(self) -> bool:
        """Whether the operator who asked may approve it too."""
        return self.standing is None or self.standing.job.self_approval

    @property
    def short(self) -> int:
        """How many more approvals exist than operators who could give them (0: none)."""
        return max(0, self.required - self.eligible)

    def blocked_for(self, operator: str | None, role: str | None) -> str | None:
        """Why `operator` gets no Approve button on this job, or None when they may approve:
        the decision point's own verdict, as the card says it."""
        if self.standing is None:
            return None
        # The page's operator is always a listed one: no role (a row that does not verify)
        # decides nothing, as a viewer.
        decider = Decider(name=operator or "", role=role)
        now = self.standing.read_at or utcnow()
        verdict = judge(self.standing, decider, intent=Intent.approve, now=now)
        return verdict.on_card


def job_approvals(session: Session, jobs_: list[Job], seal: RowSeal) -> dict[int, Approvals]:
    """The approvals of each pending job in `jobs_`, by id."""
    rows = approvals.approvals_for(session=session, job_ids=[j.id or 0 for j in jobs_])
    now = shared_now(session)  # the window is judged by the clock hosts share
    roles = permissions.APPROVING_ROLES
    deciders = set(operators.deciders(session=session, seal=seal, roles=roles))
    out: dict[int, Approvals] = {}
    for job in jobs_:
        eligible = len(deciders - ({job.asked_by_operator} if not job.self_approval else set()))
        out[job.id or 0] = Approvals(
            standing=replace(standing_of(job, rows.get(job.id or 0, []), seal), read_at=now),
            eligible=eligible,
        )
    return out


def operator_role(platform: Platform, name: str) -> str | None:
    """The role of operator `name` (None when there is no such operator, or their row does
    not verify)."""
    role = platform.operators.role_of(name)
    report_forged(platform)
    return role


@dataclass(frozen=True)
class Card:
    """One pending call as its card shows it: the arguments pretty-printed, or their head."""

    job: Job
    args_text: str
    args_chars: int
    clipped: bool
    approvals: Approvals = field(default_factory=Approvals)
    # What the tool may reach on the network (`none`, `connect 443`; SPEC §17); None when it
    # is no longer in the registry.
    network: str | None = None
    # What the call would do, when its action has a preview (SPEC §16).
    preview: PreviewView | None = None
    # The arguments one by one, as the card lays them out (None: not a JSON object).
    args: list[ShownArg] | None = None
    # The whole arguments JSON (for the invisible-characters check of what is not shown).
    whole: str = ""


# How many cards the approvals page says the outcome of, in place, after they left the queue.
OUTCOMES_SHOWN = 50
# What became of a call that left the queue, as its former card says it.
FATES = {
    JobState.approved: "approved",
    JobState.running: "approved",
    JobState.succeeded: "approved",
    JobState.failed: "approved",
    JobState.timed_out: "approved",
    JobState.lost: "approved",
    JobState.denied: "denied",
    JobState.expired: "expired",
    JobState.cancelled: "withdrawn",
}


@dataclass(frozen=True)
class Outcome:
    """A call this page showed as a card that no longer waits: where its card was, the page
    says what became of it and who decided (SPEC §25), instead of letting it vanish."""

    job: Job
    # approved / denied / expired / withdrawn (see FATES).
    fate: str
    # True when the operator viewing the page did not decide it themselves.
    by_someone_else: bool

    @property
    def ok(self) -> bool:
        """Whether the call goes on to run."""
        return self.fate == "approved"


def outcomes(platform: Platform, job_ids: list[int], viewer: str) -> list[Outcome]:
    """What became of the jobs `job_ids` (the cards a page showed) that no longer wait."""
    wanted = sorted(set(job_ids))[-OUTCOMES_SHOWN:]
    out = []
    for job in platform.jobs.get_many(wanted):
        fate = FATES.get(job.state)
        if fate is None:
            continue
        decided_by = job.decided_by or ""
        other = fate in ("approved", "denied") and decided_by != viewer
        out.append(Outcome(job=job, fate=fate, by_someone_else=other))
    return out


@dataclass
class Queue:
    """The approvals page: one page of what waits, the true count, and recent decisions."""

    pending: list[Card]
    history: list[Job]
    total: int = 0
    newest_id: int = 0
    page: int = 1
    pages: int = 1
    newest_first: bool = False

    @property
    def first(self) -> int:
        """The position in the whole queue of this page's first card (1-based)."""
        return (self.page - 1) * CARDS_PER_PAGE + 1


def _card(
    job: Job,
    head: str,
    size: int,
    policy: Approvals,
    registry: Registry,
    preview: preview_rows.PreviewHead | None,
) -> Card:
    if size > ARGS_SHOWN_CHARS:
        text, clipped = head[:ARGS_SHOWN_CHARS], True
    else:
        text, clipped = _pretty(head), False
    spec = registry.runnable("agent" if job.kind == "agent" else "tool", job.name)
    network = spec.network.shown() if spec is not None else None
    action = spec.action(job.action) if spec is not None else None
    values = parse_args(head)
    args = (
        None
        if values is None
        else shown_args(values, [a.name for a in action.args] if action else [], ARGS_SHOWN_CHARS)
    )
    shown = (
        None
        if preview is None
        else preview_view(preview.row, preview.head, size=preview.size, limit=CARD_CHARS)
    )
    return Card(
        job, text, size, clipped, policy, network, shown, args=args, whole=head if clipped else text
    )


def _whole_args(session: Session, job: Job) -> str:
    whole = queries.get_job(session=session, job_id=job.id or 0)
    return whole.args_json if whole is not None else ""


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except json.JSONDecodeError:
        return text


def approval_queue(
    platform: Platform, *, history: int = 30, page: int = 1, newest_first: bool = False
) -> Queue:
    """One page of the pending queue (oldest first, or newest first), its true size, and the
    recent decisions (newest first)."""

    def read(session: Session) -> tuple[int, int, list[tuple[Job, str, int]], int, list[Job], Any]:
        total = jobs.count_pending(session=session)
        last = max(1, -(-total // CARDS_PER_PAGE))
        shown = min(max(1, page), last)
        rows = queries.pending_page(
            session=session,
            offset=(shown - 1) * CARDS_PER_PAGE,
            limit=CARDS_PER_PAGE,
            newest_first=newest_first,
            head_chars=ARGS_SHOWN_CHARS + 1,
        )
        # A clipped card still names every argument (and shows what fits of each): it reads
        # the whole arguments of those few calls.
        rows = [
            (job, _whole_args(session, job) if size > ARGS_SHOWN_CHARS else head, size)
            for job, head, size in rows
        ]
        newest = queries.newest_pending_id(session=session)
        decided = list(dashboard_queries.recent_decisions(session=session, limit=history))
        policy = job_approvals(session, [job for job, _, _ in rows], seal)
        previews = preview_rows.preview_heads(
            session=session, job_ids=[job.id or 0 for job, _, _ in rows], head_chars=CARD_CHARS + 1
        )
        return total, shown, rows, newest, decided, (policy, previews)

    seal = platform.seal()

    total, page, rows, newest, decided, (policy, previews) = platform.jobs.step(read, write=False)
    pages = max(1, -(-total // CARDS_PER_PAGE))
    registry = platform.registry()
    return Queue(
        pending=[
            _card(job, head, size, policy[job.id or 0], registry, previews.get(job.id or 0))
            for job, head, size in rows
        ],
        history=decided,
        total=total,
        newest_id=newest,
        page=page,
        pages=pages,
        newest_first=newest_first,
    )


@dataclass
class JobDetail:
    """A job's page: the row, its audit trail, and the decoded arguments and result."""

    job: Job
    events: list[AuditEvent]
    args: Any
    result: Any
    duration: timedelta | None = None
    approved_by: str | None = None
    # The row claims an approval no valid signature covers (`webplatform.trust.claims`).
    unsigned: bool = False
    approvals: Approvals = field(default_factory=Approvals)
    # Why a worker refused the job's approval (its signature did not verify), if it did.
    forged: str | None = None
    # Why a worker refused a valid approval: it had started a run already, or was too old.
    spent: str | None = None
    # The job an operator edited this one into (edit then approve), if any.
    edited_into: int | None = None
    # What the call would do, when its action has a preview (SPEC §16).
    preview: PreviewView | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def job_detail(platform: Platform, job_id: int) -> JobDetail | None:
    """Everything about one job, or None when there is no such job."""

    def read(
        session: Session,
    ) -> tuple[Job | None, list[AuditEvent], Approvals, Job | None, JobPreview | None]:
        job = jobs.get_job(session=session, job_id=job_id)
        if job is None:
            return None, [], Approvals(), None, None
        events = list(jobs.audit_events(session=session, job_id=job_id))
        edited = queries.edited_into(session=session, job_id=job_id)
        preview = preview_rows.preview_of(session=session, job_id=job_id)
        return job, events, job_approvals(session, [job], seal)[job_id], edited, preview

    seal = platform.seal()
    job, events, policy, edited, preview = platform.jobs.step(read, write=False)
    if job is None:
        return None
    duration = job.finished_at - job.started_at if job.finished_at and job.started_at else None
    approved_by = next((e.actor for e in events if e.event == "approved"), None)
    if job.irreversible and job.state not in (
        JobState.pending_approval,
        JobState.denied,
        JobState.expired,
        JobState.cancelled,
    ):
        # Every approving operator (several when the action needs them).
        approved_by = job.decided_by or approved_by
    unsigned = claims.unsigned(job, seal)
    if job.allowed_by_rule is not None or unsigned:
        # No one approved this call: the page says which rule allowed it, or that the row
        # claims an approval no valid signature covers.
        approved_by = None
    return JobDetail(
        job=job,
        events=events,
        args=json_or_text(job.args_json),
        result=json_or_text(job.result_json),
        duration=duration,
        approved_by=approved_by,
        unsigned=unsigned,
        approvals=policy,
        forged=next((e.detail for e in events if e.event in FORGED_EVENTS), None),
        spent=next((e.detail for e in events if e.event in REFUSAL_EVENTS), None),
        edited_into=edited.id if edited is not None else None,
        preview=None if preview is None else preview_view(preview, preview.output),
    )


def unsigned_approval(platform: Platform, job: Job) -> bool:
    """True when `job`'s row claims an approval that no valid signature covers: pages and
    exports then show `claims.UNSIGNED_APPROVAL` instead of who approved it."""
    return claims.unsigned(job, platform.seal())


def json_or_text(text: str | None) -> Any:
    """Stored JSON decoded; text that is not JSON comes back as it is (None stays None)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
