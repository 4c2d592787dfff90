"""The tables: jobs, their audit trail, operators and their sessions, heartbeats, settings.

Only `webplatform.store` and the data functions built on it (`webplatform.jobs.states`) issue SQL;
everything else passes these objects around.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum, StrEnum
from typing import Any

from pydantic_core import PydanticUndefined
from sqlalchemy import DateTime, Dialect, Index, String, Text, UniqueConstraint, inspect
from sqlalchemy.orm import configure_mappers
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (the only kind of timestamp aat stores)."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that goes in as UTC and always comes back timezone-aware UTC.

    SQLite has no timezone type, so values are stored there as naive UTC text (which also
    keeps them comparable as strings); PostgreSQL stores `timestamptz`. Naive datetimes are
    refused on the way in: guessing their zone is how off-by-hours bugs start.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC; naive on SQLite so text comparisons stay correct."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(
        self,
        value: datetime | None,
        dialect: Dialect,  # noqa: ARG002
    ) -> datetime | None:
        """Attach UTC to SQLite's naive values; convert PostgreSQL's to UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class JobState(StrEnum):
    """Where a job is in its life. Only `webplatform.jobs.states.LEGAL_MOVES` may change it."""

    # Irreversible call waiting for an operator's decision in the dashboard.
    pending_approval = "pending_approval"
    # An operator approved this exact call (digest); waiting for a worker to claim it.
    approved = "approved"
    # A worker (or the requester, for a reversible call) is running the subprocess now.
    running = "running"
    # The subprocess exited 0 and printed its JSON result.
    succeeded = "succeeded"
    # The subprocess failed, was a usage error, or could not be started (see `error`).
    failed = "failed"
    # The runner killed the subprocess after its timeout.
    timed_out = "timed_out"
    # Someone withdrew the job before it finished; it will not run (again).
    cancelled = "cancelled"
    # Its worker stopped renewing the lease mid-run; the outcome is unknown, never re-run.
    lost = "lost"
    # An operator refused the call (with an optional reason for the agent).
    denied = "denied"
    # Nobody decided within AAT_APPROVAL_TTL_S; a refusal, never an approval.
    expired = "expired"


TERMINAL_STATES: frozenset[JobState] = frozenset(
    {
        JobState.succeeded,
        JobState.failed,
        JobState.timed_out,
        JobState.cancelled,
        JobState.lost,
        JobState.denied,
        JobState.expired,
    }
)
# Not finished yet: waiting for approval, approved and waiting for a worker, or running.
UNFINISHED_STATES: frozenset[JobState] = frozenset(JobState) - TERMINAL_STATES


class Surface(StrEnum):
    """Which door a job came in through."""

    mcp_stdio = "mcp-stdio"
    mcp_http = "mcp-http"
    dashboard = "dashboard"
    cli = "cli"


class EnumText(TypeDecorator[Enum]):
    """A str Enum stored as its plain value (no native ENUM type to migrate on PostgreSQL)."""

    impl = String(32)
    cache_ok = True

    def __init__(self, enum_type: type[Enum]) -> None:
        super().__init__()
        self.enum_type = enum_type

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:  # noqa: ARG002
        """Store the enum's value; plain strings are checked against the enum."""
        return None if value is None else str(self.enum_type(value).value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Enum | None:  # noqa: ARG002
        """Hand back the enum member."""
        return None if value is None else self.enum_type(value)


# What vouched for a job's requester (`requester_proof`): an agent token, an operator's login;
# None is the MCP client's own word (shown as self-reported).
TOKEN_PROOF = "token"
LOGIN_PROOF = "login"


class JobBase(SQLModel):
    """What a job is: the exact call and who asked for it."""

    kind: str = Field(sa_type=String(16))  # "tool" | "agent"
    name: str = Field(sa_type=String(200))
    action: str = Field(sa_type=String(200))
    # Canonical JSON of the arguments, secrets already masked by the caller.
    args_json: str = Field(sa_type=Text)
    # sha256 over canonical JSON of kind, name, action and the stored (masked) args.
    args_digest: str = Field(sa_type=String(64))
    irreversible: bool = False
    state: JobState = Field(sa_type=EnumText(JobState))
    surface: Surface = Field(sa_type=EnumText(Surface))
    client: str | None = Field(default=None, sa_type=String(200))
    requested_by: str | None = Field(default=None, sa_type=String(200))
    # What vouched for `requested_by`: "token" (an agent token) or "login" (an operator
    # signed in); None when nothing did and the name is the client's own word (SPEC §19).
    requester_proof: str | None = Field(default=None, sa_type=String(16))


class Job(JobBase, table=True):
    """One execution from any surface, with its whole life on one row."""

    __tablename__ = "job"
    __table_args__ = (
        Index("ix_job_state_created_at", "state", "created_at"),
        Index("ix_job_state_id", "state", "id"),
        Index("ix_job_name_id", "name", "id"),
        Index("ix_job_surface_id", "surface", "id"),
        Index("ix_job_created_at", "created_at"),
        Index("ix_job_irreversible_updated_at", "irreversible", "updated_at", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # The approving operators' names, comma-separated (several when the action needs them).
    decided_by: str | None = Field(default=None, sa_type=Text)
    decided_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    decided_from: str | None = Field(default=None, sa_type=String(200))
    reason: str | None = Field(default=None, sa_type=Text)
    # The approval policy, fixed when the job was asked for (SPEC §11): how many distinct
    # operators must approve, whether the operator who asked may be one of them, and who
    # that operator is (the run form's operator, or the owner of the agent token that asked).
    approvals_required: int = 1
    self_approval: bool = True
    asked_by_operator: str | None = Field(default=None, sa_type=String(64))
    # Why the agent wants this call, in its own words (at most 500 characters).
    agent_reason: str | None = Field(default=None, sa_type=Text)
    worker_id: str | None = Field(default=None, sa_type=String(200))
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    exit_code: int | None = None
    result_json: str | None = Field(default=None, sa_type=Text)
    stdout: str | None = Field(default=None, sa_type=Text)
    stderr: str | None = Field(default=None, sa_type=Text)
    error: str | None = Field(default=None, sa_type=Text)
    rerun_of: int | None = None
    # The pending job an operator edited into this one (SPEC §11, edit then approve): that
    # one ended denied, and the agent waiting on it follows this job instead.
    edited_from: int | None = Field(default=None, index=True)
    # The dashboard's Ed25519 signature over the decision (webplatform.trust.signing); a worker
    # runs nothing whose approval does not verify.
    decision_signature: str | None = Field(default=None, sa_type=String(200))
    # When AAT_NOTIFY was told about this pending job, and reminded before its window
    # closed; set by compare-and-set, so one process among many sends each (at most once).
    notified_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    reminded_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # Why the caller's working folder was not offered to the tool as a workspace (SPEC §17).
    note: str | None = Field(default=None, sa_type=Text)
    # The rule that allowed it without asking (SPEC §16); named in its signed decision, and
    # checked again by the worker before it starts.
    allowed_by_rule: int | None = None
    # aat's signature, made when the row is recorded, over the columns that decide how the
    # job is treated (its call, its policy, who asked, its window: `webplatform.store.seals.
    # policy_message`); the decision point and the worker refuse a job where it does not verify.
    policy_signature: str | None = Field(default=None, sa_type=String(200))
    # The digest of the preview the approving operator saw (SPEC §20: `webplatform.store.
    # previews.preview_digest`), set with the approval and covered by its signature; the
    # worker runs the preview again and starts the call only if it still says the same.
    preview_digest: str | None = Field(default=None, sa_type=String(64))


def loaded_job(values: Mapping[str, Any]) -> Job:
    """A `Job` holding `values` (a whole row as the database returned it, or the columns of
    one just inserted; the columns left out take their defaults), built as the ORM builds a
    job it loads: into its attributes at once. `Job(**values)` also runs pydantic's setter
    and SQLAlchemy's events per column, which cost more than the statement that wrote the
    row (about 0.6 ms a job, twice on every call); these values are the database's, and
    need neither."""
    configure_mappers()  # at once when they are: the first session does it otherwise
    job: Job = _JOB_MANAGER.new_instance()
    state = job.__dict__
    state.update(_JOB_DEFAULTS)
    state.update(values)
    return job


_JOB_MANAGER = inspect(Job).class_manager
_JOB_DEFAULTS: dict[str, Any] = {
    name: field.default
    for name, field in Job.model_fields.items()
    if field.default is not PydanticUndefined and field.default_factory is None
}


class JobApproval(SQLModel, table=True):
    """One operator's approval of one job's exact call; a job with `approvals_required` > 1
    collects several before it moves to `approved`."""

    __tablename__ = "job_approval"
    __table_args__ = (UniqueConstraint("job_id", "operator", name="uq_job_approval_job_operator"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(index=True)
    operator: str = Field(sa_type=String(64))
    digest: str = Field(sa_type=String(64))
    step_up: str | None = Field(default=None, sa_type=String(200))
    address: str | None = Field(default=None, sa_type=String(200))
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    # aat's signature over job, operator, digest and time: a row inserted by SQL (a second
    # "approval" nobody gave) counts as absent.
    signature: str | None = Field(default=None, sa_type=String(200))


class JobPreview(SQLModel, table=True):
    """What a queued call's preview action printed (SPEC §16), kept beside its job.

    One row per job whose action names a `preview:`, written `pending` with the job and
    finished once by the process that ran the preview. `job_id` has no foreign key, as
    for approvals: retention deletes both.
    """

    __tablename__ = "job_preview"

    job_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    # The read-only action that ran, and how it ended: pending | succeeded | failed |
    # timed_out | not_run.
    action: str = Field(sa_type=String(200))
    state: str = Field(default="pending", sa_type=String(16))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # The preview's JSON answer, or (when it failed) the head of what it printed; secrets
    # masked, at most `webplatform.jobs.previews.MAX_BYTES`.
    output: str | None = Field(default=None, sa_type=Text)
    error: str | None = Field(default=None, sa_type=Text)
    # Whether the preview printed more than was kept.
    truncated: bool = False
    # sha256 over what the card shows of it (`webplatform.store.previews.preview_digest`):
    # what an approval binds, kept here because a card reads only the head of the output.
    digest: str | None = Field(default=None, sa_type=String(64))
    # When a worker ran it again before the run and it said something else than what was
    # approved (SPEC §20): the card marks it "changed since it was approved".
    changed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


# A job as history lists it (the jobs page, exports): no arguments, result or output, so
# pages stay light. Rows are `Job`s with only these columns loaded (reading another from a
# returned row is an error, not a hidden query). They include every column a signed decision
# covers (`webplatform.trust.signing.decision_for`): a list names an approver only when the
# decision verifies (`webplatform.trust.claims`).
JOB_SUMMARY_COLUMNS: tuple[str, ...] = (
    *("id", "kind", "name", "action", "irreversible", "state", "surface", "client"),
    *("requested_by", "requester_proof", "created_at", "updated_at", "decided_by"),
    *("allowed_by_rule", "started_at", "finished_at", "exit_code", "agent_reason"),
    *("args_digest", "decided_at", "decision_signature", "preview_digest"),
)
# The approvals page's history of decisions: the summary, and how each call was decided.
JOB_DECISION_COLUMNS: tuple[str, ...] = (
    *JOB_SUMMARY_COLUMNS,
    *("expires_at", "decided_from", "reason"),
)
assert set(JOB_DECISION_COLUMNS) <= set(Job.model_fields), "a listed column that is no Job's"


class AuditEvent(SQLModel, table=True):
    """Who did what, when, from where. Decision events outlive the jobs they decided.

    `job_id` has no foreign key on purpose: retention deletes old jobs but keeps decisions.
    """

    __tablename__ = "audit_event"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int | None = Field(default=None, index=True)
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    actor: str = Field(sa_type=String(200))
    event: str = Field(sa_type=String(40))
    from_state: str | None = Field(default=None, sa_type=String(32))
    to_state: str | None = Field(default=None, sa_type=String(32))
    detail: str | None = Field(default=None, sa_type=Text)
    address: str | None = Field(default=None, sa_type=String(200))
    # The hash chain (webplatform.store.audit_chain): the previous event's hash, and this
    # event's hash over its content and `prev_hash`.
    prev_hash: str | None = Field(default=None, sa_type=String(64))
    event_hash: str | None = Field(default=None, sa_type=String(64))
    # The span active when the event was recorded (SPEC §23), in hex: a trace viewer finds the
    # call an event belongs to, and a worker continues the trace of the call that asked.
    trace_id: str | None = Field(default=None, sa_type=String(32))
    span_id: str | None = Field(default=None, sa_type=String(16))


class Operator(SQLModel, table=True):
    """A human who may approve. Only an argon2id hash of the password is kept."""

    __tablename__ = "operator"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(64), unique=True)
    password_hash: str = Field(sa_type=String(255))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    # One of webplatform.trust.permissions.ROLE_BOOK.roles ("admin", "approver", "viewer")
    role: str = Field(default="approver", sa_type=String(16))
    # aat's signature over name, role and hash (webplatform.store.seals): a row without a
    # valid one counts as absent, so an INSERT by SQL makes no operator.
    signature: str | None = Field(default=None, sa_type=String(200))
    # When a role change was last signed (signed too): a role set back to an earlier value is
    # then new content, never the earlier row that aat listed as revoked.
    signed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class OperatorPublic(SQLModel):
    """An operator as shown anywhere: never the hash."""

    id: int
    name: str
    created_at: datetime
    role: str = "approver"
    # False when the row's signature does not verify: it counts as absent.
    signed: bool = True


class OperatorSession(SQLModel, table=True):
    """A logged-in browser. Keyed by sha256 of the cookie token: a leaked table logs no one in."""

    __tablename__ = "operator_session"

    token_hash: str = Field(sa_type=String(64), primary_key=True)
    operator: str = Field(sa_type=String(64), index=True)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    last_seen_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    # aat's signature over token hash, operator and expiry: an inserted row logs no one in.
    signature: str | None = Field(default=None, sa_type=String(200))


class Heartbeat(SQLModel, table=True):
    """A running dashboard, worker or MCP bridge, so a queued call can tell nobody is there."""

    __tablename__ = "heartbeat"
    __table_args__ = (Index("ix_heartbeat_role_seen_at", "role", "seen_at"),)

    id: str = Field(sa_type=String(200), primary_key=True)
    role: str = Field(sa_type=String(16))  # "dashboard" | "worker" | "mcp"
    host: str = Field(sa_type=String(200))
    pid: int
    seen_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class Meta(SQLModel, table=True):
    """Small named values, e.g. the hashed one-time setup token."""

    __tablename__ = "meta"

    key: str = Field(sa_type=String(100), primary_key=True)
    value: str = Field(sa_type=Text)


class AgentToken(SQLModel, table=True):
    """A named bearer token an MCP client sends to `/mcp`. Only its sha256 is kept.

    The token is 256 random bits, so a fast hash is as safe as a slow one (there is nothing
    to guess) and it can be looked up by index on every request.
    """

    __tablename__ = "agent_token"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(64), unique=True)
    owner: str | None = Field(default=None, sa_type=String(64))
    token_hash: str = Field(sa_type=String(64), unique=True)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    last_used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # Set for a token an agent got by signing in (SPEC §18): when it stops working, and the
    # `/mcp` URL it was issued for (RFC 8707). Minted tokens have neither.
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    resource: str | None = Field(default=None, sa_type=String(2000))
    # aat's signature over name, owner, token hash, whether it is revoked, and (when set)
    # its expiry and resource.
    signature: str | None = Field(default=None, sa_type=String(200))


class AgentTokenPublic(SQLModel):
    """An agent token as listed anywhere: never the hash."""

    name: str
    owner: str | None = None
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    # Signed-in agents only: when the current access token expires, and its `/mcp` URL.
    expires_at: datetime | None = None
    resource: str | None = None
    # Signed-in agents only: the name the client gave when it signed in (its own word).
    client: str | None = None
    # False when the row's signature does not verify: the token gets 401.
    signed: bool = True


class Passkey(SQLModel, table=True):
    """An operator's WebAuthn credential: its id and public key only, never a secret."""

    __tablename__ = "passkey"

    id: int | None = Field(default=None, primary_key=True)
    operator: str = Field(sa_type=String(64), index=True)
    # base64url, as the browser reports it; unique across operators.
    credential_id: str = Field(sa_type=String(1400), unique=True)
    public_key: str = Field(sa_type=Text)  # COSE key, base64url
    sign_count: int = 0
    label: str = Field(sa_type=String(100))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    last_used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # The relying party it was made for (`localhost`, or the dashboard's https host). Not
    # signed: the authenticator binds the credential to it, so an edited value only hides a
    # passkey from the pages where it could not be used anyway.
    rp_id: str = Field(default="localhost", sa_type=String(253))
    # aat's signature over operator, credential id, public key and when it was added.
    signature: str | None = Field(default=None, sa_type=String(200))


class WebauthnChallenge(SQLModel, table=True):
    """A single-use WebAuthn challenge, bound to what it may prove (and to whom), short-lived.

    Kept in the database, not in memory, so any dashboard process sharing the database can
    consume it, and a consume is one compare-and-delete that only one request wins.
    """

    __tablename__ = "webauthn_challenge"

    challenge: str = Field(sa_type=String(128), primary_key=True)  # base64url
    operator: str = Field(sa_type=String(64))
    purpose: str = Field(sa_type=String(16))  # "register" | "approve" | "run" | "change"
    job_id: int | None = None
    digest: str | None = Field(default=None, sa_type=String(64))
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)


class OAuthClient(SQLModel, table=True):
    """A client that registered itself (RFC 7591 dynamic registration): its metadata as the
    SDK's `OAuthClientInformationFull` JSON. Clients named by a metadata document URL are
    fetched, not stored."""

    __tablename__ = "oauth_client"

    id: int | None = Field(default=None, primary_key=True)
    client_id: str = Field(sa_type=String(64), unique=True)
    info: str = Field(sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class OAuthGrant(SQLModel, table=True):
    """One authorization request of a signing-in agent, from `/authorize` to its code.

    Pending until an operator allows it on the dashboard; then it holds the code's hash,
    the agent's name and owner, and aat's signature; `used_at` is set when the code is
    exchanged (a code works once)."""

    __tablename__ = "oauth_grant"

    id: int | None = Field(default=None, primary_key=True)
    request_id: str = Field(sa_type=String(64), unique=True)
    client_id: str = Field(sa_type=String(2000))
    client_name: str = Field(sa_type=String(200))
    # The SDK's `AuthorizationParams` as JSON: redirect URI, PKCE challenge, resource, scopes.
    params: str = Field(sa_type=Text)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    code_hash: str | None = Field(default=None, sa_type=String(64), unique=True)
    agent: str | None = Field(default=None, sa_type=String(64))
    owner: str | None = Field(default=None, sa_type=String(64))
    used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    signature: str | None = Field(default=None, sa_type=String(200))


class OAuthRefreshToken(SQLModel, table=True):
    """A refresh token of a signed-in agent (sha256 only). Each is used once: using it
    rotates it (`rotated_at`), and using a rotated one again revokes the agent."""

    __tablename__ = "oauth_refresh_token"

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(sa_type=String(64), unique=True)
    agent: str = Field(sa_type=String(64), index=True)
    client_id: str = Field(sa_type=String(2000))
    resource: str = Field(sa_type=String(2000))
    scopes: str = Field(default="", sa_type=String(1000))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    rotated_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    signature: str | None = Field(default=None, sa_type=String(200))


class RuleRow(SQLModel, table=True):
    """A rule decided in advance (SPEC §16): its scope, its Cedar text, expiry and budget.

    Signed by aat with the decision key when it is made and when it is revoked, over
    everything but `runs`; a row whose signature does not verify allows nothing."""

    __tablename__ = "rule"

    id: int | None = Field(default=None, primary_key=True)
    effect: str = Field(sa_type=String(8))  # allow | deny | ask
    tool: str = Field(sa_type=String(200), index=True)
    action: str | None = Field(default=None, sa_type=String(200))
    requester: str | None = Field(default=None, sa_type=String(64))
    # The YAML form's conditions, as JSON (`{}` for a rule written in Cedar: see `cedar`).
    args_json: str = Field(default="{}", sa_type=Text)
    cedar: str = Field(sa_type=Text)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    max_runs: int | None = None
    # How many runs it started (failed ones included); moved only by a compare-and-set.
    runs: int = 0
    note: str = Field(default="", sa_type=String(500))
    created_by: str = Field(sa_type=String(64))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_by: str | None = Field(default=None, sa_type=String(64))
    signature: str | None = Field(default=None, sa_type=String(200))


class RevocationEntry(SQLModel, table=True):
    """One link of the revocation chain (SPEC §24): a signed row aat revoked, removed or
    replaced, on any host. Only ever appended; `hash` is sha256 over the previous entry's hash
    and this fingerprint, and every host keeps the head it last saw in its `AAT_HOME`."""

    __tablename__ = "revocation"

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(sa_type=String(64))
    prev_hash: str = Field(sa_type=String(64))
    hash: str = Field(sa_type=String(64))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class ServerToolPin(SQLModel, table=True):
    """One definition of an upstream MCP server's tool as aat saw it (SPEC §22): its name,
    description, input schema and annotations (`definition_json`) and their digest.

    `held` when first seen (a new tool, or a changed definition), `accepted` once an admin
    accepted it with a step-up, `replaced` when a later definition of the same tool was
    accepted. Only an accepted definition is offered to agents and callable."""

    __tablename__ = "server_tool_pin"
    __table_args__ = (UniqueConstraint("server", "tool", "digest"),)

    id: int | None = Field(default=None, primary_key=True)
    server: str = Field(sa_type=String(200), index=True)
    tool: str = Field(sa_type=String(200))
    digest: str = Field(sa_type=String(64))
    definition_json: str = Field(sa_type=Text)
    state: str = Field(default="held", sa_type=String(16))
    seen_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    accepted_by: str | None = Field(default=None, sa_type=String(64))
    accepted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # aat's signature over an accepted definition (`webplatform.store.seals`): a row marked
    # accepted by SQL, or a replaced one put back, is not offered and not callable.
    signature: str | None = Field(default=None, sa_type=String(200))
