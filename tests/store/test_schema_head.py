"""The fast "schema already current" check agrees with alembic and never skips a needed upgrade."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

import webplatform.store.engine as engine_module
from webplatform.config import Settings
from webplatform.store.engine import _ids_of, head_revision, make_engine
from webplatform.store.previews import preview_digest


def drop_trace_ids(conn: Connection) -> None:
    """The schema as it was before 0020 named the span of each audit event (and before 0021
    kept the revocation chain, and before 0022 signed accepted server tools)."""
    conn.execute(text("ALTER TABLE server_tool_pin DROP COLUMN signature"))
    conn.execute(text("DROP TABLE revocation"))
    conn.execute(text("ALTER TABLE audit_event DROP COLUMN trace_id"))
    conn.execute(text("ALTER TABLE audit_event DROP COLUMN span_id"))


@pytest.fixture(autouse=True)
def copied_migrations() -> None:
    """Here alembic itself migrates every database (tests/conftest.py copies its result)."""


def test_head_revision_is_alembics_head() -> None:
    config = Config()
    config.set_main_option(
        "script_location", str(Path(engine_module.__file__).parent / "migrations")
    )
    assert head_revision() == ScriptDirectory.from_config(config).get_current_head()


def test_an_older_schema_is_still_upgraded(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    engine = make_engine(settings)
    with engine.begin() as conn:
        drop_trace_ids(conn)  # 0020's
        conn.execute(text("DROP INDEX ix_job_irreversible_updated_at"))
        conn.execute(text("ALTER TABLE job DROP COLUMN preview_digest"))  # 0018's
        conn.execute(text("ALTER TABLE job DROP COLUMN policy_signature"))  # 0016's
        conn.execute(text("ALTER TABLE operator DROP COLUMN signed_at"))  # 0017's
        conn.execute(text("DROP TABLE agent_token"))
        for table in ("oauth_client", "oauth_grant", "oauth_refresh_token"):  # 0014's
            conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text("ALTER TABLE job DROP COLUMN allowed_by_rule"))  # 0015's
        conn.execute(text("DROP TABLE rule"))  # 0013's
        conn.execute(text("DROP TABLE passkey"))
        conn.execute(text("DROP TABLE webauthn_challenge"))
        conn.execute(text("DROP TABLE job_approval"))
        conn.execute(text("DROP TABLE job_preview"))
        conn.execute(text("ALTER TABLE operator DROP COLUMN role"))
        conn.execute(text("ALTER TABLE job DROP COLUMN note"))
        conn.execute(text("ALTER TABLE job DROP COLUMN requester_proof"))
        for table in ("operator", "operator_session"):  # 0010's signatures
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN signature"))
        conn.execute(text("DROP INDEX ix_job_edited_from"))
        conn.execute(text("ALTER TABLE job DROP COLUMN edited_from"))
        for column in ("approvals_required", "self_approval", "asked_by_operator", "agent_reason"):
            conn.execute(text(f"ALTER TABLE job DROP COLUMN {column}"))
        # Back to 0001 as it was: without the later revisions' columns either.
        conn.execute(text("ALTER TABLE job DROP COLUMN decision_signature"))
        conn.execute(text("ALTER TABLE job DROP COLUMN notified_at"))
        conn.execute(text("ALTER TABLE job DROP COLUMN reminded_at"))
        conn.execute(text("ALTER TABLE audit_event DROP COLUMN prev_hash"))
        conn.execute(text("ALTER TABLE audit_event DROP COLUMN event_hash"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    engine.dispose()
    engine = make_engine(settings)
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        indexes = {row[1] for row in conn.execute(text("PRAGMA index_list('job')"))}
        tables = {
            row[0]
            for row in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))
        }
        columns = {row[1] for row in conn.execute(text("PRAGMA table_info('audit_event')"))}
        job_columns = {row[1] for row in conn.execute(text("PRAGMA table_info('job')"))}
        signed = {
            table
            for table in ("operator", "passkey", "agent_token", "operator_session")
            if "signature" in {r[1] for r in conn.execute(text(f"PRAGMA table_info('{table}')"))}
        }
    engine.dispose()
    assert version == head_revision()
    assert {"ix_job_irreversible_updated_at", "ix_job_edited_from"} <= indexes
    assert {"agent_token", "passkey", "webauthn_challenge", "job_approval", "job_preview"} <= tables
    assert {"oauth_client", "oauth_grant", "oauth_refresh_token"} <= tables
    assert {"prev_hash", "event_hash"} <= columns
    assert {"note", "requester_proof"} <= job_columns
    assert signed == {"operator", "passkey", "agent_token", "operator_session"}


def test_jobs_from_before_learn_what_vouched_for_their_requester(tmp_path: Path) -> None:
    """0009 backfills `requester_proof`: the dashboard's jobs had a signed-in operator, an
    HTTP job named otherwise than its client had a token; the rest stays self-reported."""
    settings = Settings(home=tmp_path)
    engine = make_engine(settings)
    rows = {
        "dashboard": ("dashboard", "ada", None),
        "token": ("mcp-http", "build-bot", "claude-code"),
        "same name": ("mcp-http", "build-bot", "build-bot"),
        "stdio": ("mcp-stdio", "claude-code", "claude-code"),
    }
    with engine.begin() as conn:
        drop_trace_ids(conn)  # 0020's
        conn.execute(text("ALTER TABLE job DROP COLUMN note"))
        conn.execute(text("ALTER TABLE job DROP COLUMN requester_proof"))
        for table in ("operator", "passkey", "agent_token", "operator_session"):  # 0010's
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN signature"))
        conn.execute(text("DROP TABLE job_preview"))  # 0011's
        for table in ("oauth_client", "oauth_grant", "oauth_refresh_token"):  # 0014's
            conn.execute(text(f"DROP TABLE {table}"))
        for column in ("expires_at", "resource"):
            conn.execute(text(f"ALTER TABLE agent_token DROP COLUMN {column}"))
        conn.execute(text("ALTER TABLE job DROP COLUMN preview_digest"))  # 0018's
        conn.execute(text("ALTER TABLE job DROP COLUMN policy_signature"))  # 0016's
        conn.execute(text("ALTER TABLE operator DROP COLUMN signed_at"))  # 0017's
        conn.execute(text("ALTER TABLE job_approval DROP COLUMN signature"))
        conn.execute(text("ALTER TABLE job DROP COLUMN allowed_by_rule"))  # 0015's
        conn.execute(text("DROP TABLE rule"))  # 0013's
        conn.execute(text("ALTER TABLE passkey DROP COLUMN rp_id"))  # 0012's
        for i, (surface, requested_by, client) in enumerate(rows.values(), start=1):
            conn.execute(
                text(
                    "INSERT INTO job (id, kind, name, action, args_json, args_digest, "
                    "irreversible, state, surface, client, requested_by, created_at, "
                    "updated_at, approvals_required, self_approval) VALUES (:id, 'tool', 'x', "
                    "'y', '{}', 'd', 0, 'succeeded', :surface, :client, :by, "
                    "'2025-01-01 00:00:00', '2025-01-01 00:00:00', 1, 1)"
                ),
                {"id": i, "surface": surface, "client": client, "by": requested_by},
            )
        conn.execute(text("UPDATE alembic_version SET version_num = '0008'"))
    engine.dispose()
    engine = make_engine(settings)
    with engine.connect() as conn:
        found = dict(conn.execute(text("SELECT id, requester_proof FROM job ORDER BY id")).all())
    engine.dispose()
    assert found == {1: "login", 2: "token", 3: None, 4: None}


def test_previews_from_before_get_the_digest_an_approval_binds(tmp_path: Path) -> None:
    """0018 adds `job_preview.digest` and fills it in for the previews already there, so a
    card drawn after the upgrade can be approved (SPEC §20)."""
    settings = Settings(home=tmp_path)
    engine = make_engine(settings)
    with engine.begin() as conn:
        drop_trace_ids(conn)  # 0020's
        conn.execute(text("ALTER TABLE job DROP COLUMN preview_digest"))
        conn.execute(text("ALTER TABLE job_preview DROP COLUMN digest"))
        conn.execute(text("ALTER TABLE job_preview DROP COLUMN changed_at"))
        conn.execute(
            text(
                "INSERT INTO job_preview (job_id, action, state, created_at, output, truncated) "
                "VALUES (7, 'show', 'succeeded', '2026-12-01 00:00:00', '{\"a\": 1}', 0)"
            )
        )
        conn.execute(text("UPDATE alembic_version SET version_num = '0017'"))
    engine.dispose()
    engine = make_engine(settings)
    with engine.connect() as conn:
        digest = conn.execute(text("SELECT digest FROM job_preview WHERE job_id = 7")).scalar()
    engine.dispose()
    expected = preview_digest(
        action="show", state="succeeded", output='{"a": 1}', error=None, truncated=False
    )
    assert digest == expected


def test_both_header_forms_name_their_revision() -> None:
    """A script in the one-line form (script.py.mako) and one in alembic's own two-line
    form are both read; a script naming no revision leaves nothing to go by."""
    assert _ids_of('revision, down_revision = "0003", "0002"\n') == {
        "revision": "0003",
        "down_revision": "0002",
    }
    assert _ids_of('revision = "0013"\ndown_revision = "0012"\nbranch_labels = None\n') == {
        "revision": "0013",
        "down_revision": "0012",
    }
    assert _ids_of("revision, down_revision = '0001', None\n")["down_revision"] is None
    assert _ids_of("revision = make_id()\n") == {}
