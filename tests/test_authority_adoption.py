"""Rows from before rows were signed are adopted once, at the upgrade, and never again:
rows inserted afterwards stay absent, whichever marker an attacker deletes."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from sqlmodel import select

from webplatform.canonical import args_digest
from webplatform.config import Settings
from webplatform.jobs import calls
from webplatform.platform import Platform
from webplatform.store import AuditEvent, Operator, OperatorSession, session_scope, utcnow
from webplatform.store.agents import find_agent, token_hash
from webplatform.store.meta import delete_meta, set_meta
from webplatform.store.models import AgentToken, Job, JobApproval, Passkey, Surface
from webplatform.store.operators import authenticate
from webplatform.store.passkeys import has_passkey
from webplatform.store.passwords import hash_password
from webplatform.trust import authority
from webplatform.trust.decidability import Standing, read_standing

PASSWORD = "correct horse battery"
TOKEN = "aat_" + "t" * 43


def _old_rows(platform: Platform) -> None:
    """What an aat from before signatures left behind: the same rows, none signed."""
    with session_scope(platform.engine) as session:
        session.add(Operator(name="ada", password_hash=hash_password(PASSWORD), role="admin"))
        session.add(AgentToken(name="bot", owner="ada", token_hash=token_hash(TOKEN)))
        session.add(
            Passkey(operator="ada", credential_id="Y3JlZA", public_key="cGs", label="laptop")
        )
        session.add(
            OperatorSession(
                token_hash=hashlib.sha256(b"old cookie").hexdigest(),
                operator="ada",
                expires_at=utcnow() + timedelta(days=1),
            )
        )


def _counts(platform: Platform) -> tuple[bool, bool, bool, bool]:
    seal = authority.seal_for(platform)
    with session_scope(platform.engine) as session:
        return (
            authenticate(session=session, name="ada", password=PASSWORD, seal=seal),
            find_agent(session=session, token=TOKEN, seal=seal) is not None,
            has_passkey(session=session, operator="ada", seal=seal),
            authenticate(session=session, name="mallory", password=PASSWORD, seal=seal),
        )


def test_rows_from_before_the_upgrade_are_signed_once_and_never_again(
    settings: Settings,
) -> None:
    platform = Platform(settings)
    _old_rows(platform)
    seal = authority.seal_for(platform)  # the first aat process with the key, after upgrading
    assert _counts(platform) == (True, True, True, False)
    with session_scope(platform.engine, write=False) as session:
        events = session.exec(
            select(AuditEvent).where(AuditEvent.event == authority.ADOPTED_EVENT)
        ).all()
        sessions = session.exec(select(OperatorSession)).all()
    assert [e.detail for e in events] == [
        "signed the rows from before signatures: operator ada, passkey 1 of ada, agent bot; "
        "ended 1 unsigned session(s)"
    ]
    assert sessions == []  # unsigned sessions end: everyone logs in again
    assert (settings.home / authority.ADOPTED_FILE).exists()

    with session_scope(platform.engine) as session:
        session.add(Operator(name="mallory", password_hash=hash_password(PASSWORD)))
    # Every later start adopts nothing: not with the database's marker deleted...
    with session_scope(platform.engine) as session:
        delete_meta(session=session, key=authority.ADOPTED_KEY)
    authority.adopt_unsigned(platform, seal)
    assert _counts(platform)[3] is False
    # ...nor in a new AAT_HOME on the same database (another host), whose marker is missing.
    with session_scope(platform.engine) as session:
        set_meta(session=session, key=authority.ADOPTED_KEY, value="before")
    (settings.home / authority.ADOPTED_FILE).unlink()
    authority.adopt_unsigned(platform, seal)
    assert _counts(platform)[3] is False
    platform.engine.dispose()


def _old_job(platform: Platform) -> int:
    """A job waiting for its second approval, as an aat from before migration 0016 left it:
    neither its policy nor its first approval signed."""
    args = {"to": "x@example.org", "subject": "old", "body": "b"}
    call = calls.Call(
        kind="tool",
        name="outbox",
        action="send-message",
        args=args,
        digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
        irreversible=True,
        surface=Surface.mcp_stdio,
        approvals_required=2,
    )
    with session_scope(platform.engine) as session:
        job = calls.create_job(session=session, call=call, start=calls.Waiting(ttl_s=900))
        session.add(JobApproval(job_id=job.id or 0, operator="ada", digest=job.args_digest))
        return job.id or 0


def _standing(platform: Platform, job_id: int) -> Standing:
    seal = authority.seal_for(platform)
    with session_scope(platform.engine, write=False) as session:
        job = session.get(Job, job_id)
        assert job is not None
        return read_standing(session, job, seal)


def test_approvals_and_policies_from_before_0016_are_signed_once(settings: Settings) -> None:
    platform = Platform(settings)
    job_id = _old_job(platform)
    standing = _standing(platform, job_id)  # the first process with the key adopts them
    assert standing.given == ("ada",) and standing.tampered is None
    with session_scope(platform.engine, write=False) as session:
        events = session.exec(
            select(AuditEvent).where(AuditEvent.event == authority.ADOPTED_EVENT)
        ).all()
    assert [e.detail for e in events][-1] == (
        f"signed the policies of jobs {job_id} and 1 approval(s) from before they were "
        f"signed: approval of job {job_id} by ada"
    )
    assert (settings.home / authority.APPROVALS_ADOPTED_FILE).exists()

    # Afterwards nothing is adopted again, even with the database's marker deleted.
    with session_scope(platform.engine) as session:
        session.add(JobApproval(job_id=job_id, operator="bob", digest=standing.job.args_digest))
        delete_meta(session=session, key=authority.APPROVALS_ADOPTED_KEY)
    authority.adopt_unsigned_approvals(platform, authority.seal_for(platform))
    assert _standing(platform, job_id).given == ("ada",)
    platform.engine.dispose()
