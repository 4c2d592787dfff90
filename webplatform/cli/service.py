"""`aat service install`: the service-account deployment in one command, run as root.

A system user owns `AAT_HOME` (`/var/lib/aat`, 0700) and runs `aat serve` under systemd, so
agents running as other OS users reach aat only through `/mcp` with an agent token: they
cannot read the database, and so cannot approve anything by writing to it.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from webplatform.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE

UNIT_NAME = "aat.service"
DEFAULT_UNIT_DIR = Path("/etc/systemd/system")
DEFAULT_HOME = Path("/var/lib/aat")


@dataclass(frozen=True)
class Plan:
    """What an install does: the user, its home, the unit file and what it says."""

    user: str
    port: int
    home: Path
    unit_path: Path
    unit: str


def unit_text(*, user: str, port: int, home: Path, command: list[str]) -> str:
    """The systemd unit that runs `aat serve` as `user` with `AAT_HOME=home`."""
    exec_start = shlex.join([*command, "serve", "--host", "127.0.0.1", "--port", str(port)])
    return f"""[Unit]
Description=aat: dashboard, /mcp and worker (approvals by a human operator)
After=network.target

[Service]
Type=simple
User={user}
Environment=AAT_HOME={home}
WorkingDirectory={home}
ExecStart={exec_start}
Restart=on-failure
UMask=0077
NoNewPrivileges=true
PrivateTmp=true
ProtectSystem=full

[Install]
WantedBy=multi-user.target
"""


def make_plan(ns: argparse.Namespace) -> Plan:
    """The install `ns` asks for."""
    from webplatform.mcp.client_config import aat_command

    home = Path(ns.home)
    unit_path = Path(ns.unit_dir) / UNIT_NAME
    unit = unit_text(user=ns.user, port=ns.port, home=home, command=aat_command())
    return Plan(user=ns.user, port=ns.port, home=home, unit_path=unit_path, unit=unit)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def actions(plan: Plan) -> list[str]:
    """The steps an install takes, in order, as one line each."""
    steps = []
    if _user_exists(plan.user):
        steps.append(f"keep the existing user {plan.user}")
    else:
        steps.append(f"create system user {plan.user} (home {plan.home}, no login shell)")
    steps.append(f"create {plan.home} (mode 0700, owned by {plan.user})")
    steps.append(f"write {plan.unit_path}")
    if plan.unit_path.parent == DEFAULT_UNIT_DIR:
        steps.append("systemctl daemon-reload")
    return steps


def install(plan: Plan) -> None:
    """Carry out `plan`; raises OSError or CalledProcessError on failure."""
    if not _user_exists(plan.user):
        subprocess.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--home-dir",
                str(plan.home),
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                plan.user,
            ],
            check=True,
        )
    account = pwd.getpwnam(plan.user)
    plan.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(plan.home, account.pw_uid, account.pw_gid)
    plan.home.chmod(0o700)
    plan.unit_path.parent.mkdir(parents=True, exist_ok=True)
    plan.unit_path.write_text(plan.unit)
    plan.unit_path.chmod(0o644)
    if plan.unit_path.parent == DEFAULT_UNIT_DIR and shutil.which("systemctl"):
        subprocess.run(["systemctl", "daemon-reload"], check=True)


def next_steps(plan: Plan) -> str:
    """What the operator does after the install."""
    as_user = f"sudo -u {plan.user} env AAT_HOME={plan.home} aat"
    url = f"http://127.0.0.1:{plan.port}/mcp"
    return f"""Next steps:
  1. start it:                  systemctl enable --now {plan.unit_path.stem}
  2. create the first operator: {as_user} operator add NAME
  3. mint an agent token:       {as_user} agent add AGENT --owner NAME
                                (or on the dashboard's Agents page)
  4. point the agent at it:     aat config opencode --url {url}
                                and give the agent AAT_AGENT_TOKEN=<the token>
  The `aat` executable must be readable by {plan.user}: install aat system-wide if it lives
  in a private virtual environment."""


def cmd_service(ns: argparse.Namespace, _extra: list[str]) -> int:
    """`aat service install`: print the plan; carry it out unless `--dry-run`."""
    plan = make_plan(ns)
    if not ns.dry_run and os.geteuid() != 0:
        print(
            "aat service install: run it as root (sudo aat service install), "
            "or add --dry-run to see what it would do",
            file=sys.stderr,
        )
        return EXIT_USAGE
    verb = "would" if ns.dry_run else "will"
    print(f"aat service install {verb}:")
    for step in actions(plan):
        print(f"  - {step}")
    print(f"\n{plan.unit_path}:\n{plan.unit}")
    if ns.dry_run:
        print("dry run: nothing was changed")
        return EXIT_OK
    try:
        install(plan)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"aat service install: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(next_steps(plan))
    return EXIT_OK
