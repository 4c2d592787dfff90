"""Settings that cannot work are refused in one line; tokens and passwords never print."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from serving import aat_env

from webplatform.config import Settings, SettingsError, get_settings

AAT = str(Path(sys.executable).parent / "aat")  # the console script, as a user runs it
TOKEN = "tok-7f3a9c-never-print-me"
DB_PASSWORD = "pw-b41e-never-print-me"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "work").mkdir()
    return aat_env(tmp_path / "home")


def aat(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    work = Path(env["AAT_HOME"]).parent / "work"
    return subprocess.run(
        [AAT, *args], env=env, capture_output=True, text=True, timeout=60, cwd=work, stdin=None
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    "command",
    [
        ["check"],
        ["run", "hello-world", "name=Ada"],
        ["worker"],
        ["serve"],
        ["mcp"],
        ["operator", "list"],
        ["agent", "list"],
        ["config", "opencode"],
    ],
    ids=lambda c: c[0],
)
def test_a_zero_worker_lease_is_refused_in_one_line_by_every_command(
    env: dict[str, str], command: list[str]
) -> None:
    done = aat({**env, "AAT_WORKER_LEASE_S": "0", "AAT_MCP_TOKEN": TOKEN}, *command)
    assert done.returncode == 2, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "AAT_WORKER_LEASE_S=0 must be greater than 0" in lines[0]
    assert "Traceback" not in done.stderr and TOKEN not in done.stderr
    assert done.stdout == ""
    assert not (Path(env["AAT_HOME"]) / "aat.db").exists(), "nothing may start on bad settings"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AAT_WORKER_LEASE_S", "-1"),
        ("AAT_APPROVAL_TTL_S", "0"),
        ("AAT_APPROVAL_WAIT_S", "-0.5"),
        ("AAT_HEARTBEAT_S", "inf"),
        ("AAT_HEARTBEAT_S", "nan"),
        ("AAT_RESULT_MAX_BYTES", "0"),
        ("AAT_CAPABILITIES_MAX_BYTES", "-40000"),
        ("AAT_RETENTION_DAYS", "0"),
        ("AAT_MAX_PENDING", "0"),
        ("AAT_MAX_ARGS_BYTES", "-1"),
        ("AAT_WORKER_LEASE_S", "ten"),
    ],
)
def test_nonsensical_values_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as refused:
        get_settings()
    message = str(refused.value)
    assert message.startswith(f"{variable}={value} must be ")
    assert "\n" not in message and "change or unset" in message


def test_every_wrong_variable_is_named_on_the_same_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AAT_WORKER_LEASE_S", "0")
    monkeypatch.setenv("AAT_RETENTION_DAYS", "-3")
    message = str(pytest.raises(SettingsError, get_settings).value)
    assert "AAT_WORKER_LEASE_S=0" in message and "AAT_RETENTION_DAYS=-3" in message
    assert "\n" not in message


def test_small_positive_values_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AAT_WORKER_LEASE_S", "0.4")
    monkeypatch.setenv("AAT_RETENTION_DAYS", "1")
    settings = get_settings()
    assert (settings.worker_lease_s, settings.retention_days) == (0.4, 1)


@pytest.mark.integration
def test_a_port_out_of_range_is_refused(env: dict[str, str]) -> None:
    done = aat(env, "serve", "--port", "0")
    assert done.returncode == 2
    assert "argument --port: '0' is not a port number (1 to 65535)" in done.stderr
    assert "Traceback" not in done.stderr


def test_tokens_and_database_passwords_never_print(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AAT_MCP_TOKEN", TOKEN)
    monkeypatch.setenv("AAT_AGENT_TOKEN", TOKEN + "-agent")
    monkeypatch.setenv("AAT_DB_URL", f"postgresql+psycopg://aat:{DB_PASSWORD}@db/aat")
    settings = get_settings()
    with caplog.at_level(logging.INFO):
        logging.getLogger("aat.test").info("settings: %r / %s", settings, settings)
    for shown in (repr(settings), str(settings), settings.model_dump_json(), caplog.text):
        assert TOKEN not in shown and DB_PASSWORD not in shown
    # The code that needs them still reads them.
    assert settings.mcp_token.get_secret_value() == TOKEN
    assert settings.agent_token.get_secret_value() == TOKEN + "-agent"
    assert DB_PASSWORD in settings.database_url


def test_a_malformed_secret_is_named_but_not_echoed() -> None:
    with pytest.raises(SettingsError) as refused:
        get_settings(mcp_token=["not", TOKEN])
    assert "AAT_MCP_TOKEN" in str(refused.value) and TOKEN not in str(refused.value)


def test_settings_built_in_tests_are_checked_too() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        Settings(worker_lease_s=0)
