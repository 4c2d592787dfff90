"""`/readyz` for a load balancer: ready only while the database answers with the code's schema."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from webplatform.platform import Platform
from webplatform.store.engine import head_revision, session_scope


def _set_version(platform: Platform, version: str) -> None:
    with session_scope(platform.engine) as session:
        session.connection().execute(
            text("UPDATE alembic_version SET version_num = :v"), {"v": version}
        )


def test_ready_with_the_schema_current_and_says_why_not_otherwise(
    platform: Platform, client: TestClient
) -> None:
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    # Like every page, it answers only to the Host names the dashboard serves.
    assert client.get("/readyz", headers={"Host": "evil.example"}).status_code == 400
    head = head_revision()
    assert head is not None
    _set_version(platform, "0001")
    try:
        behind = client.get("/readyz")
        assert behind.status_code == 503
        assert behind.json() == {
            "status": "unready",
            "reason": f"the database schema is at 0001, not {head}",
        }
    finally:
        _set_version(platform, head)
    assert client.get("/readyz").status_code == 200


def test_unready_while_the_database_does_not_answer(platform: Platform, client: TestClient) -> None:
    answering = platform.engine
    # A server that is gone: nothing listens on port 1.
    platform.engine = create_engine("postgresql+psycopg://aat@127.0.0.1:1/aat")
    try:
        gone = client.get("/readyz")
    finally:
        platform.engine.dispose()
        platform.engine = answering
    assert gone.status_code == 503
    reason = gone.json()["reason"]
    assert reason.startswith("the database does not answer: ") and "\n" not in reason
    assert client.get("/healthz").status_code == 200
