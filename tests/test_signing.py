"""Signed decisions: a database write alone never makes an irreversible call run.

Each test queues a real `outbox send-message`, tampers with the row the way an agent with a
shell and the database could, and runs the real worker: the job must end `failed` naming the
invalid signature, with an audit event, and nothing may reach the outbox.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from serving import aat_env
from sqlalchemy import Engine, text
from stepup_helpers import job_step_up

from dashboard.app import create_app
from webplatform.canonical import args_digest
from webplatform.config import EXAMPLES_ROOT, Settings
from webplatform.jobs import calls, decisions
from webplatform.jobs import states as jobs
from webplatform.platform import Platform
from webplatform.process import runner
from webplatform.registry import RegistryLoader
from webplatform.store import Job, JobState, Surface, session_scope, transact
from webplatform.trust import signing
from webplatform.trust.authority import seal_for
from webplatform.worker import Worker

S = JobState
AAT = [sys.executable, "-m", "webplatform"]
PASSWORD = "correct horse battery"


def _worker(platform: Platform, settings: Settings | None = None) -> Worker:
    return Worker(
        platform=platform,
        settings=settings or platform.settings,
        load_registry=RegistryLoader([EXAMPLES_ROOT]).load,
        run=runner.run,
        worker_id="w-test",
    )


def _pending(platform: Platform, subject: str = "hello", **extra: Any) -> Job:
    args = {"to": "bob@example.org", "subject": subject, "body": "hi", **extra}

    def create(session: Any) -> Job:
        call = calls.Call(
            kind="tool",
            name="outbox",
            action="send-message",
            args=args,
            digest=args_digest(kind="tool", name="outbox", action="send-message", args=args),
            irreversible=True,
            surface=Surface.mcp_stdio,
            client="agent",
        )
        return calls.create_job(
            session=session, call=call, start=calls.Waiting(ttl_s=900, seal=seal_for(platform))
        )

    return transact(platform.engine, create)


def _approve(platform: Platform, job: Job) -> None:
    decisions.approve(
        platform=platform,
        job_id=job.id or 0,
        operator="olga",
        digest=job.args_digest,
        address="127.0.0.1",
        step_up=job_step_up(platform, job.id or 0, "olga"),
    )


def _sql(engine: Engine, statement: str, **params: Any) -> None:
    with engine.begin() as conn:
        conn.execute(text(statement), params)


def _job(platform: Platform, job_id: int | None) -> Job:
    with session_scope(platform.engine, write=False) as session:
        job = jobs.get_job(session=session, job_id=job_id or 0)
    assert job is not None
    return job


def _outbox(settings: Settings) -> list[str]:
    folder = settings.home / "outbox"
    return sorted(p.name for p in folder.glob("[!.]*.json")) if folder.is_dir() else []


def _assert_refused(platform: Platform, job_id: int | None) -> Job:
    sent_before = _outbox(platform.settings)
    assert _worker(platform).run_once(), "the worker claimed the forged job"
    job = _job(platform, job_id)
    assert job.state == S.failed
    assert job.error and "invalid signature" in job.error, job.error
    assert job.exit_code is None and job.result_json is None
    with session_scope(platform.engine, write=False) as session:
        events = jobs.audit_events(session=session, job_id=job_id or 0)
    refused = [e for e in events if e.event == "signature-invalid"]
    assert len(refused) == 1 and "invalid signature" in (refused[0].detail or "")
    assert "outbox send-message" in (refused[0].detail or "")
    assert _outbox(platform.settings) == sent_before
    return job


def test_a_signed_approval_runs(platform: Platform, settings: Settings) -> None:
    job = _pending(platform)
    _approve(platform, job)
    approved = _job(platform, job.id)
    assert approved.decision_signature
    assert _worker(platform).run_once()
    assert _job(platform, job.id).state == S.succeeded
    assert len(_outbox(settings)) == 1


def test_an_approval_forged_by_sql_update_never_runs(platform: Platform) -> None:
    signing.signer_for(platform.settings.home)  # the dashboard has started once
    job = _pending(platform, "forged")
    # What an agent with a shell can do to the database file: no operator involved.
    _sql(
        platform.engine,
        "UPDATE job SET state = 'approved', decided_by = 'olga', decided_at = created_at "
        "WHERE id = :id",
        id=job.id,
    )
    _assert_refused(platform, job.id)


def test_flagging_the_forged_job_reversible_does_not_skip_the_check(platform: Platform) -> None:
    signing.signer_for(platform.settings.home)
    job = _pending(platform, "disguised")
    _sql(
        platform.engine,
        "UPDATE job SET state = 'approved', irreversible = :f, surface = 'dashboard', "
        "decided_by = 'olga', decided_at = created_at WHERE id = :id",
        id=job.id,
        f=False,
    )
    _assert_refused(platform, job.id)


def test_an_approval_signed_by_another_key_never_runs(platform: Platform) -> None:
    signing.signer_for(platform.settings.home)
    job = _pending(platform, "other key")
    stranger = signing.DecisionSigner(Ed25519PrivateKey.generate())
    transact(
        platform.engine,
        lambda s: jobs.approve(
            session=s,
            job_id=job.id or 0,
            operator="olga",
            digest=job.args_digest,
            signer=stranger,
            context=jobs.Context(seal=seal_for(platform)),  # the job's policy is the home's
        ),
    )
    assert _job(platform, job.id).decision_signature
    _assert_refused(platform, job.id)


def test_a_decision_copied_from_another_job_never_runs(platform: Platform) -> None:
    genuine, target = _pending(platform, "genuine"), _pending(platform, "target")
    _approve(platform, genuine)
    _sql(
        platform.engine,
        "UPDATE job SET state = 'approved', decided_by = g.decided_by, "
        "decided_at = g.decided_at, decided_from = g.decided_from, "
        "decision_signature = g.decision_signature "
        "FROM (SELECT decided_by, decided_at, decided_from, decision_signature FROM job "
        "WHERE id = :g) AS g WHERE job.id = :t",
        g=genuine.id,
        t=target.id,
    )
    assert (
        _job(platform, target.id).decision_signature
        == _job(platform, genuine.id).decision_signature
    )
    # The genuine job is claimed first (oldest) and runs; the copy is refused.
    assert _worker(platform).run_once()
    assert _job(platform, genuine.id).state == S.succeeded
    assert _outbox(platform.settings) != []
    sent = _outbox(platform.settings)
    assert _worker(platform).run_once()
    copied = _job(platform, target.id)
    assert copied.state == S.failed and "invalid signature" in (copied.error or "")
    assert _outbox(platform.settings) == sent


def test_a_digest_changed_after_approval_never_runs(platform: Platform) -> None:
    job = _pending(platform, "approved text")
    _approve(platform, job)
    # Arguments and digest changed together, so the digest re-check alone would pass.
    evil = {"to": "mallory@example.org", "subject": "approved text", "body": "hi"}
    digest = args_digest(kind="tool", name="outbox", action="send-message", args=evil)
    _sql(
        platform.engine,
        "UPDATE job SET args_json = :a, args_digest = :d WHERE id = :id",
        a=json.dumps(evil),
        d=digest,
        id=job.id,
    )
    _assert_refused(platform, job.id)


def test_a_worker_without_any_key_leaves_approved_jobs_alone(
    platform: Platform, tmp_path: Any
) -> None:
    job = _pending(platform)
    _approve(platform, job)
    elsewhere = platform.settings.model_copy(update={"home": tmp_path / "other-host"})
    assert not _worker(platform, elsewhere).run_once()
    assert _job(platform, job.id).state == S.approved


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = aat_env(settings.home, **extra)
    if settings.db_url:
        env["AAT_DB_URL"] = settings.db_url.get_secret_value()
    return env


@pytest.mark.integration  # runs `aat keys show`
def test_keys_show_prints_the_public_key_for_workers_on_other_hosts(
    platform: Platform, settings: Settings, tmp_path: Any
) -> None:
    missing = subprocess.run(
        [*AAT, "keys", "show"], env=_env(settings), capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1 and "aat serve" in missing.stderr

    platform.operators.add("olga", PASSWORD)
    create_app(settings, platform=platform, embed_worker=False, mcp=False)  # first start
    key = settings.home / signing.PRIVATE_KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    shown = subprocess.run(
        [*AAT, "keys", "show"], env=_env(settings), capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    line = shown.stdout.strip()
    assert line.startswith("ed25519:") and "\n" not in line
    assert line == signing.signer_for(settings.home).public_line

    key.chmod(0o644)  # as a careless copy or restore leaves it
    exposed = subprocess.run(
        [*AAT, "keys", "show"], env=_env(settings), capture_output=True, text=True, timeout=60
    )
    assert exposed.returncode == 1 and exposed.stdout == ""
    assert exposed.stderr == (
        f"aat keys: {key} can be read or changed by other users (mode 0644); "
        f"run `chmod 600 {key}` and start again\n"
    )
    key.chmod(0o600)

    job = _pending(platform)
    _approve(platform, job)
    # No key files at all; beside tmp_path, since a workspace may not contain AAT_HOME.
    other_host = tmp_path.parent / f"{tmp_path.name}-worker-host"
    wrong = signing.public_line(Ed25519PrivateKey.generate().public_key())
    refusing = platform.settings.model_copy(
        update={"home": other_host, "decision_public_key": wrong}
    )
    assert _worker(platform, refusing).run_once()
    assert _job(platform, job.id).state == S.failed

    second = _pending(platform, "second")
    _approve(platform, second)
    trusting = platform.settings.model_copy(
        update={"home": other_host, "decision_public_key": line}
    )
    assert _worker(platform, trusting).run_once()
    assert _job(platform, second.id).state == S.succeeded


def test_a_malformed_public_key_says_what_to_paste(settings: Settings) -> None:
    bad = settings.model_copy(update={"decision_public_key": "ssh-rsa AAAA"})
    with pytest.raises(ValueError, match="aat keys show"):
        signing.verifier_for(bad)


def _csrf(client: TestClient, path: str) -> str:
    match = re.search(r'name="csrf_token" value="([0-9a-f]+)"', client.get(path).text)
    assert match, f"no CSRF token on {path}"
    return match.group(1)


def test_the_dashboard_run_form_signs_the_operators_approval(
    platform: Platform, settings: Settings
) -> None:
    platform.operators.add("olga", PASSWORD)
    app = create_app(settings, platform=platform, embed_worker=False, mcp=False)
    base = "http://127.0.0.1:8000"
    with TestClient(app, base_url=base, follow_redirects=False) as client:
        r = client.post(
            "/login",
            data={"username": "olga", "password": PASSWORD, "next": "/"},
            headers={"Origin": base},
        )
        assert r.status_code == 303, r.text
        r = client.post(
            "/run/tool/outbox/send-message",
            data={
                "csrf_token": _csrf(client, "/run/tool/outbox/send-message"),
                "arg:to": "bob@example.org",
                "arg:subject": "from the form",
                "arg:body": "hi",
                "confirm": "yes",
                "password": PASSWORD,
            },
            headers={"Origin": base},
        )
        assert r.status_code == 303, r.text
        job_id = int(r.headers["location"].rsplit("/", 1)[1])
        assert _job(platform, job_id).decision_signature
        assert _worker(platform).run_once()
        assert _job(platform, job_id).state == S.succeeded

        forged = _pending(platform, "forged for the page")
        _sql(
            platform.engine,
            "UPDATE job SET state = 'approved', decided_by = 'olga', decided_at = created_at "
            "WHERE id = :id",
            id=forged.id,
        )
        _assert_refused(platform, forged.id)
        page = client.get(f"/jobs/{forged.id}")
        assert page.status_code == 200
        assert 'class="notice error forged"' in page.text and "invalid signature" in page.text
        history = client.get("/jobs")
        assert "state-failed" in history.text
