"""`aat rules list | add FILE | revoke ID | export` as an admin runs them: real processes,
a real SQLite file; the admin's password is the step-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # runs the aat command line

AAT = [sys.executable, "-m", "webplatform"]
RULES = """\
- effect: allow
  tool: outbox
  action: send-message
  args: {to: "*@example.org", subject: {one_of: [Weekly report]}}
  expires_in: 1h
  max_runs: 20
- effect: deny
  tool: outbox
  action: delete-messages
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    env = {**clean, "AAT_HOME": str(tmp_path / "home")}
    for name, role in (("ada", "admin"), ("bob", "approver")):
        added = aat(
            env,
            "operator",
            "add",
            name,
            "--role",
            role,
            "--password-stdin",
            stdin="pw-" + name + "-long\n",
        )
        assert added.returncode == 0, added.stderr
    return env


def aat(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AAT, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


def test_an_admin_adds_lists_exports_and_revokes_rules(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(RULES)
    added = aat(
        env,
        "rules",
        "add",
        str(tmp_path / "rules.yaml"),
        "--by",
        "ada",
        "--password-stdin",
        stdin="pw-ada-long\n",
    )
    assert added.returncode == 0, added.stderr
    ids = added.stdout.split()
    assert len(ids) == 2 and all(i.isdigit() for i in ids)

    listed = json.loads(aat(env, "rules", "list").stdout)
    fields = {"id", "effect", "tool", "action", "requester", "args", "expires_at", "max_runs"}
    fields |= {"runs", "created_by", "revoked"}
    assert all(fields <= set(row) for row in listed)
    allow = next(row for row in listed if row["effect"] == "allow")
    assert allow["args"] == {"to": "*@example.org", "subject": {"one_of": ["Weekly report"]}}
    assert (allow["max_runs"], allow["runs"], allow["created_by"]) == (20, 0, "ada")
    assert json.loads(aat(env, "rules", "export").stdout) == listed

    revoked = aat(
        env,
        "rules",
        "revoke",
        str(allow["id"]),
        "--by",
        "ada",
        "--password-stdin",
        stdin="pw-ada-long\n",
    )
    assert revoked.returncode == 0, revoked.stderr
    after = {row["id"]: row for row in json.loads(aat(env, "rules", "list").stdout)}
    assert after[allow["id"]]["revoked"] is True


@pytest.mark.parametrize(
    ("who", "password", "error"),
    [
        ("ada", "wrong-password", "not an admin, or the password is wrong"),
        ("bob", "pw-bob-long", "not an admin, or the password is wrong"),
    ],
)
def test_only_an_admin_with_the_right_password_adds_a_rule(
    env: dict[str, str], tmp_path: Path, who: str, password: str, error: str
) -> None:
    (tmp_path / "rules.yaml").write_text(RULES)
    refused = aat(
        env,
        "rules",
        "add",
        str(tmp_path / "rules.yaml"),
        "--by",
        who,
        "--password-stdin",
        stdin=password + "\n",
    )
    assert refused.returncode == 2 and error in refused.stderr
    assert json.loads(aat(env, "rules", "list").stdout) == []


def test_a_bad_rules_file_gets_one_line_naming_its_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text("- effect: allow\n  tool: outbox\n  expire_in: 1h\n")
    bad = aat(
        env,
        "rules",
        "add",
        str(tmp_path / "bad.yaml"),
        "--by",
        "ada",
        "--password-stdin",
        stdin="pw-ada-long\n",
    )
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "aat rules add: line 3: unknown key `expire_in`: did you mean `expires_in`?"
    ]
    (tmp_path / "bad.cedar").write_text('permit(principal, action resource == Tool::"outbox");\n')
    cedar = aat(
        env,
        "rules",
        "add",
        str(tmp_path / "bad.cedar"),
        "--by",
        "ada",
        "--password-stdin",
        stdin="pw-ada-long\n",
    )
    assert cedar.returncode == 1 and "line 1: the Cedar does not parse" in cedar.stderr
    assert len(cedar.stderr.strip().splitlines()) == 1
