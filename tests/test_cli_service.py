"""`aat service install`: the dry run changes nothing; a real install (run as root) with the
unit and home redirected into a temporary folder creates the user, the private home and the unit."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # runs the aat command line

AAT = [sys.executable, "-m", "webplatform"]


def service(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAT_")}
    return subprocess.run(
        [
            *AAT,
            "service",
            "install",
            "--home",
            str(tmp_path / "var-lib-aat"),
            "--unit-dir",
            str(tmp_path / "units"),
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def new_user() -> Iterator[str]:
    """A system user name nobody has; removed again after the test."""
    name = f"aat-t{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["userdel", name], capture_output=True, check=False)


def test_dry_run_prints_the_unit_and_changes_nothing(tmp_path: Path, new_user: str) -> None:
    done = service(tmp_path, "--user", new_user, "--port", "8123", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"create system user {new_user}" in done.stdout
    assert f"User={new_user}" in done.stdout
    assert f"Environment=AAT_HOME={tmp_path / 'var-lib-aat'}" in done.stdout
    assert "serve --host 127.0.0.1 --port 8123" in done.stdout
    assert "nothing was changed" in done.stdout
    assert not (tmp_path / "units").exists() and not (tmp_path / "var-lib-aat").exists()
    with pytest.raises(KeyError):
        pwd.getpwnam(new_user)


def test_install_creates_the_user_private_home_and_unit(tmp_path: Path, new_user: str) -> None:
    assert os.geteuid() == 0, "this test creates a system user: run it as root (CI does)"
    done = service(tmp_path, "--user", new_user, "--port", "8124")
    assert done.returncode == 0, done.stderr
    account = pwd.getpwnam(new_user)
    home = tmp_path / "var-lib-aat"
    assert home.stat().st_uid == account.pw_uid and (home.stat().st_mode & 0o777) == 0o700
    unit = (tmp_path / "units" / "aat.service").read_text()
    assert f"User={new_user}" in unit and "--port 8124" in unit
    assert "systemctl enable --now aat" in done.stdout
    assert "aat config opencode --url http://127.0.0.1:8124/mcp" in done.stdout
    again = service(tmp_path, "--user", new_user, "--port", "8124")
    assert again.returncode == 0 and f"keep the existing user {new_user}" in again.stdout
