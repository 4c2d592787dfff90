"""Moving in (SPEC §22): a project's Claude Code `.mcp.json` imported with one command, its
server listed (tools held), accepted by an admin with a step-up, and reachable through aat
alone: `aat servers import | list | show | accept` and `aat run`, as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # runs the aat command line

AAT = [sys.executable, "-m", "webplatform"]
UPSTREAM = Path(__file__).resolve().with_name("upstream.py")
SECRET = "cli-upstream-secret-value"


def aat(
    env: dict[str, str], *args: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AAT, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    env = {**clean, "AAT_HOME": str(tmp_path / "home"), "SECRET_TOKEN": SECRET}
    for name, role in (("ada", "admin"), ("bob", "approver")):
        added = aat(
            env,
            "operator",
            "add",
            name,
            "--role",
            role,
            "--password-stdin",
            stdin=f"pw-{name}-long\n",
        )
        assert added.returncode == 0, added.stderr
    return env


# Ten `aat` processes in a row: on a loaded machine that is more than the default two minutes.
@pytest.mark.timeout(400)
def test_a_project_s_mcp_json_imports_and_its_server_answers_through_aat(
    env: dict[str, str], tmp_path: Path
) -> None:
    project, root, defs = tmp_path / "project", tmp_path / "registry", tmp_path / "defs"
    for folder in (project, root, defs):
        folder.mkdir()
    (defs / "peek.txt").write_text("Show the token")
    servers = {
        "up": {
            "command": sys.executable,
            "args": [str(UPSTREAM), str(defs / "peek.txt")],
            "env": {"SECRET_TOKEN": "${SECRET_TOKEN}"},
        }
    }
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))

    imported = aat(env, "servers", "import", str(project / ".mcp.json"), "--into", str(root))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == str(root / "servers" / "up" / "server.yaml")
    assert "SECRET_TOKEN is a secret" in imported.stderr
    assert SECRET not in (root / "servers" / "up" / "server.yaml").read_text()

    reg = ["--registry", str(root)]
    listed = aat(env, "servers", "list", *reg, cwd=project)
    assert listed.returncode == 0, listed.stderr
    (up,) = json.loads(listed.stdout)
    assert up["accepted"] == [] and "peek" in up["held"]

    before = aat(env, "run", "up", "peek", *reg, cwd=project)
    assert before.returncode != 0 and "is held" in before.stdout

    for by, password in (("bob", "pw-bob-long"), ("ada", "wrong")):
        refused = aat(
            env, "servers", "accept", "up", "--by", by, "--password-stdin", *reg, stdin=password
        )
        assert refused.returncode != 0 and "refused" in refused.stderr
    accepted = aat(
        env, "servers", "accept", "up", "--by", "ada", "--password-stdin", *reg, stdin="pw-ada-long"
    )
    assert accepted.returncode == 0, accepted.stderr
    assert "peek" in json.loads(accepted.stdout)

    shown = json.loads(aat(env, "servers", "show", "up", *reg, cwd=project).stdout)
    assert {t["tool"]: t["state"] for t in shown["tools"]}["peek"] == "accepted"

    ran = aat(env, "run", "up", "peek", *reg, cwd=project)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    answer = json.loads(ran.stdout)
    assert answer["status"] == "succeeded" and "token is" in ran.stdout
    assert SECRET not in ran.stdout
