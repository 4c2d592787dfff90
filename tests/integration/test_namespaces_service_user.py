"""The namespaces hold for an unprivileged service user too (SPEC §17, §20): tests/test_network.py,
tests/test_limits.py and the confinement tests of tests/test_warm.py, run by pytest as a
system user made here.

Run as root (as CI does). An interpreter under /root cannot be run by another user, so the
inner run uses a venv on the system Python, in a 0755 folder under /tmp, that borrows this
checkout and the dev venv's dependencies with a `.pth` file (as tests/test_service_account.py
does). The user's runtime folder (/run/user/UID, where D-Bus lives) is made for it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
INNER = [
    "tests/test_network.py",
    "tests/test_warm.py::test_confinement_refuses_a_warm_tool_exactly_as_a_plain_one",
    "tests/test_warm.py::test_a_tool_cannot_kill_the_process_that_forked_it",
    "tests/test_confinement.py::test_a_tool_writes_its_tmpdir_and_a_workspace",
    # The limits (SPEC §20) hold for it too, where RLIMIT_NPROC would count all its processes.
    "tests/test_limits.py",
]


@pytest.fixture
def service_user() -> Iterator[pwd.struct_passwd]:
    """A new system user with a runtime folder in /run/user, both removed afterwards."""
    if os.geteuid() != 0:
        pytest.fail("this test creates an OS user: run it as root (CI does)")
    name = f"aat-ns-{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--system", name], check=True, capture_output=True)
    user = pwd.getpwnam(name)
    runtime = Path(f"/run/user/{user.pw_uid}")
    made = [p for p in (runtime.parent, runtime) if not p.exists()]
    try:
        for folder in made:
            folder.mkdir(mode=0o755)
        runtime.chmod(0o700)
        os.chown(runtime, user.pw_uid, user.pw_gid)
        yield user
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
        if runtime.parent in made:
            shutil.rmtree(runtime.parent, ignore_errors=True)
        gone = subprocess.run(["userdel", name], capture_output=True, text=True)
        assert gone.returncode == 0, f"userdel {name}: {gone.stderr}"


@pytest.fixture
def system_venv(service_user: pwd.struct_passwd) -> Iterator[tuple[Path, Path]]:
    """(python, a 0700 folder of the user's): a venv on the system Python that every user can
    run, with this checkout and the dev venv's dependencies importable."""
    root = Path(tempfile.mkdtemp(prefix="aat-ns-user-", dir="/tmp"))
    try:
        root.chmod(0o755)
        venv = root / "venv"
        subprocess.run(
            [SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
        )
        (site,) = venv.glob("lib/python*/site-packages")
        purelib = sysconfig.get_paths()["purelib"]
        (site / "_aat_checkout.pth").write_text(f"{ROOT}\n{purelib}\n")
        subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
        own = root / "user"
        own.mkdir(mode=0o700)
        os.chown(own, service_user.pw_uid, service_user.pw_gid)
        yield venv / "bin" / "python", own
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_namespaces_hold_for_an_unprivileged_service_user(
    service_user: pwd.struct_passwd, system_venv: tuple[Path, Path]
) -> None:
    python, own = system_venv
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AAT_", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    env.update(HOME=str(own), PYTHONDONTWRITEBYTECODE="1", TMPDIR="/tmp")
    ids = [f"--reuid={service_user.pw_uid}", f"--regid={service_user.pw_gid}", "--init-groups"]
    pytest_argv = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"]
    done = subprocess.run(
        ["setpriv", *ids, "--", *pytest_argv, "-n", "0", f"--basetemp={own / 'tmp'}", *INNER],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=800,
    )
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and " failed" not in done.stdout, tail
    whoami = subprocess.run(
        ["setpriv", *ids, "--", str(python), "-c", "import os; print(os.getuid())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(whoami.stdout) == service_user.pw_uid != 0
