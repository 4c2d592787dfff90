"""A database writer cannot put back a signed row aat revoked (SPEC §19).

Each test copies a row while it still holds (exactly as it is in the database, signature
included), lets aat revoke, remove or replace it, then puts the copy back by SQL, on a real
SQLite file and on PostgreSQL: an agent token revoked, a rule revoked, a passkey removed, an
old password hash, an operator removed. Each copy counts as absent, and the audit trail
says it was put back, because the fingerprint of its content is in `AAT_HOME/revoked-rows`.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import select

from webplatform.platform import Platform
from webplatform.store import agents, operators, passkeys, rules
from webplatform.store.audit import AuditEvent
from webplatform.store.engine import session_scope
from webplatform.store.seals import FORGED_EVENT, REVOKED
from webplatform.trust.authority import report_forged, seal_for
from webplatform.trust.permissions import ROLE_BOOK
from webplatform.trust.revocations import REVOKED_FILE

PASSWORD = "correct horse battery"


def _copy(platform: Platform, table: str, where: str) -> dict[str, Any]:
    """The row as the attacker saves it: every column, as the database returns it."""
    with session_scope(platform.engine, write=False) as session:
        row = session.connection().execute(text(f"SELECT * FROM {table} WHERE {where}"))
        return dict(row.mappings().one())


def _put_back(platform: Platform, table: str, where: str, saved: dict[str, Any]) -> None:
    """The attack: the saved row, exactly, in place of whatever is there now."""
    columns = ", ".join(saved)
    values = ", ".join(f":{name}" for name in saved)
    with session_scope(platform.engine) as session:
        connection = session.connection()
        connection.execute(text(f"DELETE FROM {table} WHERE {where}"))
        connection.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({values})"), saved)


def _put_back_reported(platform: Platform, what: str) -> None:
    report_forged(platform)
    with session_scope(platform.engine, write=False) as session:
        rows = session.exec(select(AuditEvent).where(AuditEvent.event == FORGED_EVENT)).all()
    details = [row.detail or "" for row in rows]
    assert len(details) == 1 and details[0].startswith(what) and REVOKED in details[0]


def _operator(platform: Platform, name: str = "ada") -> None:
    with session_scope(platform.engine) as session:
        operators.add_operator(
            session=session, name=name, password=PASSWORD, seal=seal_for(platform), roles=ROLE_BOOK
        )


def test_a_revoked_agent_token_put_back_by_sql_stays_revoked(platform: Platform) -> None:
    seal = seal_for(platform)
    with session_scope(platform.engine) as session:
        _row, token = agents.add_agent(session=session, name="bot", owner=None, seal=seal)
    saved = _copy(platform, "agent_token", "name = 'bot'")
    with session_scope(platform.engine) as session:
        assert agents.revoke_agent(session=session, name="bot", seal=seal)
    assert saved["revoked_at"] is None and (platform.settings.home / REVOKED_FILE).exists()
    _put_back(platform, "agent_token", "name = 'bot'", saved)
    with session_scope(platform.engine, write=False) as session:
        assert agents.find_agent(session=session, token=token, seal=seal) is None
        assert agents.active_agent(session=session, name="bot", seal=seal) is None
    _put_back_reported(platform, "agent token bot: ")


def test_a_revoked_rule_put_back_by_sql_allows_nothing(platform: Platform) -> None:
    seal = seal_for(platform)
    new = rules.NewRule(
        effect="allow",
        tool="outbox",
        action="send-message",
        requester=None,
        args_json="{}",
        cedar='permit (principal, action == Action::"send-message", resource);',
        expires_at=None,
        max_runs=None,
        note="",
    )
    with session_scope(platform.engine) as session:
        rule_id = rules.add_rule(session=session, rule=new, by="ada", seal=seal).id
    saved = _copy(platform, "rule", f"id = {rule_id}")
    with session_scope(platform.engine) as session:
        assert rules.revoke_rule(session=session, rule_id=rule_id or 0, by="ada", seal=seal)
    _put_back(platform, "rule", f"id = {rule_id}", saved)
    with session_scope(platform.engine, write=False) as session:
        assert rules.find_rule(session=session, rule_id=rule_id or 0, seal=seal) is None
    _put_back_reported(platform, f"rule {rule_id}: ")


def test_a_removed_passkey_put_back_by_sql_confirms_nothing(platform: Platform) -> None:
    seal = seal_for(platform)
    _operator(platform)
    new = passkeys.NewPasskey(
        operator="ada", credential_id="Y3JlZA", public_key="cGs", sign_count=0, label="laptop"
    )
    with session_scope(platform.engine) as session:
        key_id = passkeys.add_passkey(session=session, new=new, seal=seal).id or 0
    saved = _copy(platform, "passkey", f"id = {key_id}")
    with session_scope(platform.engine) as session:
        removed = passkeys.remove_passkey(
            session=session, operator="ada", passkey_id=key_id, seal=seal
        )
        assert removed
    _put_back(platform, "passkey", f"id = {key_id}", saved)
    with session_scope(platform.engine, write=False) as session:
        assert not passkeys.has_passkey(session=session, operator="ada", seal=seal)
        found = passkeys.find_passkey(
            session=session, operator="ada", credential_id="Y3JlZA", seal=seal
        )
        assert found is None
    _put_back_reported(platform, f"passkey {key_id} of ada: ")


def test_an_old_password_hash_put_back_by_sql_logs_no_one_in(platform: Platform) -> None:
    seal = seal_for(platform)
    _operator(platform)
    saved = _copy(platform, "operator", "name = 'ada'")
    with session_scope(platform.engine) as session:
        operators.set_password(
            session=session, name="ada", password="a new long one", seal=seal, actor="ada"
        )
    _put_back(platform, "operator", "name = 'ada'", saved)
    with session_scope(platform.engine) as session:
        assert not operators.authenticate(session=session, name="ada", password=PASSWORD, seal=seal)
        assert operators.find_operator(session=session, name="ada", seal=seal) is None
    _put_back_reported(platform, "operator ada: ")


def test_a_removed_operator_put_back_by_sql_is_no_operator(platform: Platform) -> None:
    seal = seal_for(platform)
    _operator(platform)
    _operator(platform, "bob")
    saved = _copy(platform, "operator", "name = 'bob'")
    with session_scope(platform.engine) as session:
        assert operators.remove_operator(session=session, name="bob", seal=seal)
    _put_back(platform, "operator", "name = 'bob'", saved)
    with session_scope(platform.engine) as session:
        assert not operators.authenticate(session=session, name="bob", password=PASSWORD, seal=seal)
        with pytest.raises(operators.OperatorError, match="decides nothing"):
            operators.decider_role(session=session, name="bob", seal=seal)
    _put_back_reported(platform, "operator bob: ")


def test_an_earlier_role_put_back_by_sql_is_no_role(platform: Platform) -> None:
    seal = seal_for(platform)
    _operator(platform)  # the first operator is admin
    _operator(platform, "bob")
    with session_scope(platform.engine) as session:
        operators.set_role(
            session=session, name="bob", role="admin", seal=seal, actor="ada", roles=ROLE_BOOK
        )
    as_admin = _copy(platform, "operator", "name = 'bob'")
    with session_scope(platform.engine) as session:
        operators.set_role(
            session=session, name="bob", role="viewer", seal=seal, actor="ada", roles=ROLE_BOOK
        )
    _put_back(platform, "operator", "name = 'bob'", as_admin)
    with session_scope(platform.engine) as session:
        assert operators.operator_role(session=session, name="bob", seal=seal) is None
    _put_back_reported(platform, "operator bob: ")


def test_a_role_set_back_by_aat_is_a_new_signed_row(platform: Platform) -> None:
    seal = seal_for(platform)
    _operator(platform)
    _operator(platform, "bob")
    for role in ("admin", "approver", "admin"):
        with session_scope(platform.engine) as session:
            operators.set_role(
                session=session, name="bob", role=role, seal=seal, actor="ada", roles=ROLE_BOOK
            )
        with session_scope(platform.engine) as session:
            assert operators.operator_role(session=session, name="bob", seal=seal) == role
