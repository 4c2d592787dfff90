"""Secrets come from the environment, then the OS keyring; a missing or broken keyring is normal."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import KeyringLocked

from webplatform.registry import ToolSpec, resolve_secrets, secret_present, secret_status
from webplatform.registry.secrets import KEYRING_SERVICE


class MemoryKeyring(KeyringBackend):
    """A real keyring backend (keyring's own plug-in interface) that keeps passwords in memory."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.passwords.pop((service, username), None)


class LockedKeyring(MemoryKeyring):
    """A backend that fails the way a locked desktop keyring does."""

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("the keyring is locked")


Install = Callable[[KeyringBackend], KeyringBackend]


@pytest.fixture
def use_keyring() -> Iterator[Install]:
    """Install a keyring backend for one test and put the previous one back afterwards."""
    previous = keyring.get_keyring()

    def install(backend: KeyringBackend) -> KeyringBackend:
        keyring.set_keyring(backend)
        return backend

    yield install
    keyring.set_keyring(previous)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AAT_TEST_TOKEN", "AAT_TEST_OTHER"):
        monkeypatch.delenv(name, raising=False)


def tool(*secrets: str) -> ToolSpec:
    return ToolSpec(
        "tool", "t", "d", "", "python", "main.py", Path("."), Path("tool.yaml"), secrets
    )


def test_environment_value_is_found(monkeypatch: pytest.MonkeyPatch, use_keyring: Install) -> None:
    use_keyring(fail.Keyring())
    monkeypatch.setenv("AAT_TEST_TOKEN", "s3cret")
    assert secret_present("AAT_TEST_TOKEN")
    assert resolve_secrets(["AAT_TEST_TOKEN", "AAT_TEST_OTHER"]) == {"AAT_TEST_TOKEN": "s3cret"}


def test_no_keyring_backend_means_missing_not_an_error(use_keyring: Install) -> None:
    use_keyring(fail.Keyring())
    assert not secret_present("AAT_TEST_TOKEN")
    assert resolve_secrets(["AAT_TEST_TOKEN"]) == {}


def test_keyring_is_used_when_the_environment_has_nothing(use_keyring: Install) -> None:
    backend = use_keyring(MemoryKeyring())
    backend.set_password(KEYRING_SERVICE, "AAT_TEST_TOKEN", "from-keyring")
    backend.set_password("another-app", "AAT_TEST_OTHER", "not-ours")
    assert resolve_secrets(["AAT_TEST_TOKEN", "AAT_TEST_OTHER"]) == {
        "AAT_TEST_TOKEN": "from-keyring"
    }


def test_environment_wins_over_keyring(
    monkeypatch: pytest.MonkeyPatch, use_keyring: Install
) -> None:
    backend = use_keyring(MemoryKeyring())
    backend.set_password(KEYRING_SERVICE, "AAT_TEST_TOKEN", "from-keyring")
    monkeypatch.setenv("AAT_TEST_TOKEN", "from-env")
    assert resolve_secrets(["AAT_TEST_TOKEN"]) == {"AAT_TEST_TOKEN": "from-env"}


def test_empty_environment_value_counts_as_unset(
    monkeypatch: pytest.MonkeyPatch, use_keyring: Install
) -> None:
    backend = use_keyring(MemoryKeyring())
    monkeypatch.setenv("AAT_TEST_TOKEN", "")
    assert not secret_present("AAT_TEST_TOKEN")
    backend.set_password(KEYRING_SERVICE, "AAT_TEST_TOKEN", "from-keyring")
    assert resolve_secrets(["AAT_TEST_TOKEN"]) == {"AAT_TEST_TOKEN": "from-keyring"}


def test_broken_keyring_is_swallowed_and_logs_no_value(
    monkeypatch: pytest.MonkeyPatch, use_keyring: Install, caplog: pytest.LogCaptureFixture
) -> None:
    use_keyring(LockedKeyring())
    monkeypatch.setenv("AAT_TEST_OTHER", "value-never-logged")
    with caplog.at_level(logging.DEBUG, logger="webplatform.registry.secrets"):
        assert resolve_secrets(["AAT_TEST_TOKEN", "AAT_TEST_OTHER"]) == {
            "AAT_TEST_OTHER": "value-never-logged"
        }
    assert "value-never-logged" not in caplog.text
    assert "AAT_TEST_TOKEN" in caplog.text and "KeyringLocked" in caplog.text


def test_secret_status_reports_presence_per_declared_name(
    monkeypatch: pytest.MonkeyPatch, use_keyring: Install
) -> None:
    use_keyring(fail.Keyring())
    monkeypatch.setenv("AAT_TEST_TOKEN", "s3cret")
    status = secret_status(tool("AAT_TEST_TOKEN", "AAT_TEST_OTHER"))
    assert status == {"AAT_TEST_TOKEN": True, "AAT_TEST_OTHER": False}
    assert secret_status(tool()) == {}
