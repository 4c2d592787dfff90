"""`aat` as a user runs it: real processes, real SQLite file, the example registry."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from serving import aat_env

pytestmark = pytest.mark.integration

AAT = [sys.executable, "-m", "webplatform"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return aat_env(tmp_path / "home")


def aat(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    # Run from a project folder beside AAT_HOME: the caller's folder is the call's workspace,
    # and a workspace may not contain AAT_HOME or aat's installation (SPEC §14).
    work = Path(env["AAT_HOME"]).parent / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [*AAT, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60, cwd=work
    )


def test_check_passes_on_the_example_registry(env: dict[str, str]) -> None:
    done = aat(env, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hello-world" in done.stdout and "0 with errors" in done.stdout


def test_check_fails_with_file_and_line_on_a_broken_manifest(
    env: dict[str, str], tmp_path: Path
) -> None:
    tool = tmp_path / "reg" / "tools" / "broken"
    tool.mkdir(parents=True)
    (tool / "main.py").write_text("print('{}')\n")
    (tool / "tool.yaml").write_text(
        "name: broken\ndescription: x\nversion: 0.1.0\nruntime: python\nentrypoint: main.py\n"
        "actions:\n  - name: go\n    args:\n      - {name: n, type: strng}\n"
    )
    done = aat(env, "check", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 1
    error_lines = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert len(error_lines) == 1
    assert "tool.yaml:9" in error_lines[0] and "strng" in error_lines[0]


def test_check_names_a_limit_above_its_ceiling(env: dict[str, str], tmp_path: Path) -> None:
    tool = tmp_path / "reg" / "tools" / "greedy"
    tool.mkdir(parents=True)
    (tool / "main.py").write_text("print('{}')\n")
    (tool / "tool.yaml").write_text(
        "name: greedy\ndescription: x\nversion: 0.1.0\nruntime: python\nentrypoint: main.py\n"
        "limits: {processes: 5000}\nactions:\n  - name: go\n"
    )
    done = aat({**env, "AAT_MAX_PROCESSES": "2000"}, "check", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 1
    error_lines = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert error_lines == [
        f"error  tool  {tool / 'tool.yaml'}:6: `limits.processes: 5000` is above its ceiling of "
        "2000 (AAT_MAX_PROCESSES); lower it, or the operator raises the setting"
    ], done.stdout


def test_check_rejects_warm_on_a_runtime_other_than_python(
    env: dict[str, str], tmp_path: Path
) -> None:
    tool = tmp_path / "reg" / "tools" / "hot-shell"
    tool.mkdir(parents=True)
    (tool / "main.sh").write_text("echo '{}'\n")
    (tool / "tool.yaml").write_text(
        "name: hot-shell\ndescription: x\nversion: 0.1.0\nruntime: bash\nentrypoint: main.sh\n"
        "warm: true\nactions:\n  - name: go\n"
    )
    done = aat(env, "check", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 1
    error_lines = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert len(error_lines) == 1, done.stdout
    assert (
        "tool.yaml:6" in error_lines[0]
        and "`warm: true` needs `runtime: python`" in (error_lines[0])
    )


def test_run_prints_the_tools_json(env: dict[str, str]) -> None:
    done = aat(env, "run", "hello-world", "greet", "--name", "Ada Lovelace")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"] == "succeeded"
    assert answer["result"] == {"greeting": "Hello, Ada Lovelace!"}


def test_run_passes_values_that_start_with_dashes(env: dict[str, str]) -> None:
    done = aat(env, "run", "hello-world", "greet", "--name=--verbose")
    assert json.loads(done.stdout)["result"] == {"greeting": "Hello, --verbose!"}


def test_run_bad_input_is_one_line_and_exit_2(env: dict[str, str]) -> None:
    done = aat(env, "run", "hello-world", "greet", "--nmae", "x")
    assert done.returncode == 2
    answer = json.loads(done.stdout)
    assert answer["status"] == "invalid"
    assert "\n" not in answer["error"] and "did you mean 'name'" in answer["error"]
    unknown = aat(env, "run", "no-such-tool", "go")
    assert unknown.returncode == 2
    assert "unknown tool 'no-such-tool'" in json.loads(unknown.stdout)["error"]


def test_irreversible_run_is_queued_not_sent(env: dict[str, str], tmp_path: Path) -> None:
    done = aat(
        env,
        "run",
        "outbox",
        "send-message",
        "--to",
        "a@example.org",
        "--subject",
        "send now",
        "--body",
        "x",
        "--no-wait",
    )
    answer = json.loads(done.stdout)
    assert answer["status"] == "pending_approval", done.stdout
    assert answer["approval_url"].endswith(f"/jobs/{answer['job']}")
    assert not (tmp_path / "home" / "outbox").exists() or not any(
        (tmp_path / "home" / "outbox").iterdir()
    )


def test_aat_run_no_wait_leaves_its_preview_finished(env: dict[str, str], tmp_path: Path) -> None:
    from webplatform.config import Settings
    from webplatform.platform import Platform
    from webplatform.store import previews

    args = ["--to", "a@example.org", "--subject", "<b>hi</b>", "--body", "x", "--no-wait"]
    done = aat(env, "run", "outbox", "send-message", *args)
    job_id = json.loads(done.stdout)["job"]
    platform = Platform(Settings(home=tmp_path / "home"))
    try:
        row = platform.transact(lambda s: previews.preview_of(session=s, job_id=job_id))
    finally:
        platform.engine.dispose()
    # The command waited for the preview it started, after printing its answer.
    assert row is not None and row.state == "succeeded", row
    assert row.action == "preview-message" and "<b>hi</b>" in (row.output or "")


def test_check_refuses_a_preview_that_is_not_read_only(env: dict[str, str], tmp_path: Path) -> None:
    tool = tmp_path / "reg" / "tools" / "mailer"
    tool.mkdir(parents=True)
    (tool / "main.py").write_text("print('{}')\n")
    (tool / "tool.yaml").write_text(
        "name: mailer\ndescription: x\nversion: 0.1.0\nruntime: python\nentrypoint: main.py\n"
        "actions:\n  - name: send\n    preview: draft\n  - name: draft\n"
    )
    done = aat(env, "check", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 1
    error_lines = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert len(error_lines) == 1, done.stdout
    assert "tool.yaml:8" in error_lines[0] and "'draft' must be read-only" in error_lines[0]


def test_operator_add_list_remove(env: dict[str, str]) -> None:
    short = aat(env, "operator", "add", "ada", "--password-stdin", stdin="short\n")
    assert short.returncode == 2 and "8" in short.stderr
    added = aat(env, "operator", "add", "ada", "--password-stdin", stdin="correct horse 9\n")
    assert added.returncode == 0, added.stderr
    assert aat(env, "operator", "list").stdout.split() == ["ada", "admin"]
    assert aat(env, "operator", "remove", "ada").returncode == 0
    assert aat(env, "operator", "list").stdout.split() == []
    assert aat(env, "operator", "remove", "ada").returncode == 1


def test_operator_role_password_and_rows_added_outside_aat(
    env: dict[str, str], tmp_path: Path
) -> None:
    for name in ("ada", "bob"):
        added = aat(env, "operator", "add", name, "--password-stdin", stdin="correct horse 9\n")
        assert added.returncode == 0, added.stderr
    made = aat(env, "operator", "role", "bob", "--role", "viewer")
    assert made.returncode == 0 and made.stdout.strip() == "operator bob (viewer)"
    last = aat(env, "operator", "role", "ada", "--role", "approver")
    assert last.returncode == 2 and "last admin" in last.stderr
    changed = aat(env, "operator", "password", "bob", "--password-stdin", stdin="another one 9\n")
    assert changed.returncode == 0, changed.stderr
    # An operator row a database writer inserted is listed, marked, and counts for nothing.
    database = sqlite3.connect(tmp_path / "home" / "aat.db")
    with database:
        database.execute(
            "INSERT INTO operator (name, password_hash, created_at, role) "
            "VALUES ('mallory', 'x', '2025-01-01 00:00:00', 'admin')"
        )
    database.close()
    listed = aat(env, "operator", "list").stdout.splitlines()
    assert listed == [
        "ada\tadmin",
        "bob\tviewer",
        "mallory\tadmin\tunsigned: counts as absent (re-add it)",
    ]


def test_home_and_database_are_private(env: dict[str, str], tmp_path: Path) -> None:
    aat(env, "run", "hello-world", "greet", "--name", "x")
    home = tmp_path / "home"
    assert home.stat().st_mode & 0o777 == 0o700
    assert (home / "aat.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("writes", ["$AAT_HOME", "${AAT_HOME}/..", "/"])
def test_check_rejects_writes_that_reach_aat_home(
    env: dict[str, str], tmp_path: Path, writes: str
) -> None:
    tool = tmp_path / "reg" / "tools" / "greedy"
    tool.mkdir(parents=True)
    (tool / "main.py").write_text("print('{}')\n")
    (tool / "tool.yaml").write_text(
        "name: greedy\ndescription: x\nversion: 0.1.0\nruntime: python\nentrypoint: main.py\n"
        f"writes:\n  - {writes}\nactions:\n  - name: go\n"
    )
    done = aat(env, "check", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 1
    error_lines = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert len(error_lines) == 1, done.stdout
    assert "tool.yaml:7" in error_lines[0] and "is or contains AAT_HOME" in error_lines[0]


@pytest.mark.parametrize("key", ["reads", "writes"])
@pytest.mark.parametrize(
    "path", ["$AAT_HOME/cache", "$AAT_HOME/run", "$AAT_HOME/decision-key.pem", "$AAT_HOME/data"]
)
def test_check_refuses_aats_own_folders_and_files_in_aat_home(
    env: dict[str, str], tmp_path: Path, key: str, path: str
) -> None:
    """Only tools' data folders in AAT_HOME may be named (SPEC §19): its cache is loaded by
    every new aat process, its run/ holds the relay socket and its secret."""
    tool = tmp_path / "reg" / "tools" / "greedy"
    tool.mkdir(parents=True)
    (tool / "main.py").write_text("print('{}')\n")
    (tool / "tool.yaml").write_text(
        "name: greedy\ndescription: x\nversion: 0.1.0\nruntime: python\nentrypoint: main.py\n"
        f"{key}:\n  - {path}\n  - $AAT_HOME/data/greedy\nactions:\n  - name: go\n"
    )
    done = aat(env, "check", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 1
    error_lines = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert len(error_lines) == 1, done.stdout
    assert error_lines[0].endswith(
        f"tool.yaml:7: `{key}: {path}` is in AAT_HOME but in no data folder of tools (AAT_HOME "
        "holds aat's cache, keys, database and sockets); name $AAT_HOME/outbox or "
        "$AAT_HOME/data/<tool> instead"
    ), error_lines[0]


def test_check_rejects_a_network_it_does_not_know(env: dict[str, str], tmp_path: Path) -> None:
    tool = tmp_path / "reg" / "tools" / "online"
    tool.mkdir(parents=True)
    (tool / "main.py").write_text("print('{}')\n")
    (tool / "tool.yaml").write_text(
        "name: online\ndescription: x\nversion: 0.1.0\nruntime: python\nentrypoint: main.py\n"
        "network: {connect: [443, https]}\nactions:\n  - name: go\n"
    )
    done = aat(env, "check", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 1
    error_lines = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert error_lines == [
        f"error  tool  {tool / 'tool.yaml'}:6: `network.connect` entry 'https' is not a TCP "
        "port (1 to 65535)"
    ], done.stdout


@pytest.mark.parametrize(
    ("accepted", "line"),
    [
        (
            "",
            "aat worker: tools are not run: this system cannot give them namespaces of their own "
            "(AAT_CONFINE_PRETEND_NO_NAMESPACES is set); allow unprivileged user namespaces "
            "(sysctl user.max_user_namespaces, and on Ubuntu "
            "kernel.apparmor_restrict_unprivileged_userns=0), or to run them with Landlock "
            "alone, the operator sets AAT_UNCONFINED=namespaces",
        ),
        (
            "namespaces",
            "aat worker: tools run without namespaces of their own "
            "(AAT_CONFINE_PRETEND_NO_NAMESPACES is set), with Landlock alone, as "
            "AAT_UNCONFINED=namespaces accepts",
        ),
    ],
)
def test_a_worker_says_at_start_when_tools_get_no_namespaces(
    env: dict[str, str], accepted: str, line: str
) -> None:
    env = {**env, "AAT_CONFINE_PRETEND_NO_NAMESPACES": "1", "AAT_UNCONFINED": accepted}
    proc = subprocess.Popen(
        [*AAT, "worker"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(env["AAT_HOME"]).parent,
    )
    said: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        said.extend(text.rstrip("\n") for text in proc.stderr)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # Said at start, among the worker's first lines (how many others it logs is its own).
        deadline = time.monotonic() + 30
        while line not in said and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=10)
    assert line in said, said


def test_a_worker_says_nothing_of_confinement_where_tools_get_it_all(env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        [*AAT, "worker"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(env["AAT_HOME"]).parent,
    )
    try:
        time.sleep(3)  # the check takes well under a second
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=10)
    assert "namespaces" not in stderr and "Landlock" not in stderr, stderr
