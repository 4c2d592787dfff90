"""What a tool process starts with: its argv list (never a shell) and its whole environment.

The environment is a small fixed base plus the tool's declared secrets, never the caller's.
"""

from __future__ import annotations

import json
import os
import pwd
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webplatform.registry.model import ActionSpec, ToolSpec

# Fixed directories appended after the interpreter's own; enough for bash, node and coreutils.
BASE_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


def build_argv(tool: ToolSpec, action: ActionSpec, args: Mapping[str, Any]) -> list[str]:
    """The argv list for one call: `<runtime> <entrypoint> ACTION --arg-name value ...`.

    Rules tools can rely on (argparse parses all of them):
    - arguments appear in the order of `args`, names verbatim, each as `--name`;
    - `True` is the bare flag `--name`; `False` and `None` are left out;
    - numbers are JSON (`3`, `2.5`); dicts and lists are one JSON element (non-ASCII kept);
    - strings are passed as they are, as a separate element after `--name`;
    - any value whose text starts with `-` is joined as `--name=value`, because a parser
      would otherwise take `--force` or `-1` for an option instead of the value.
    The interpreter for `python` is the one running aat (`sys.executable`), so tools see aat's
    dependencies (openpyxl); `bash` and `node` are looked up on the runner's PATH; `exec`
    runs the entrypoint itself.
    """
    entry = str(tool.entrypoint_path)
    prefix = {
        "python": [sys.executable, entry],
        "bash": ["bash", entry],
        "node": ["node", entry],
        "exec": [entry],
    }[tool.runtime]
    argv = [*prefix, action.name]
    for name, value in args.items():
        if value is None or value is False:
            continue
        if value is True:
            argv.append(f"--{name}")
            continue
        text = _arg_text(value)
        if text.startswith("-"):
            argv.append(f"--{name}={text}")
        else:
            argv += [f"--{name}", text]
    return argv


def _arg_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple | int | float):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def build_env(
    tool: ToolSpec,
    action: ActionSpec,
    *,
    home: Path,
    secrets: Mapping[str, str],
    caller_cwd: Path | None = None,
) -> dict[str, str]:
    """The tool's whole environment: a fixed base, `AAT_*` facts, and its declared secrets.

    Nothing is inherited from the caller's environment, so a credential exported in the
    shell that started aat never reaches a tool that did not declare it. Secrets not named in
    `tool.secrets` are dropped, and no secret can override the base or the `AAT_*` keys.
    HOME is the user's real home directory (from the password database, not the caller's
    environment): it is not a secret, interpreters and `~/...` paths a user passes need it.
    Aat's own state directory is `AAT_HOME`.
    """
    interpreter_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join(dict.fromkeys([interpreter_dir, *BASE_PATH]))
    base = {
        "PATH": path,
        "HOME": _user_home(),
        "TMPDIR": tempfile.gettempdir(),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONUNBUFFERED": "1",
        "AAT_HOME": str(home),
        "AAT_TOOL": tool.name,
        "AAT_ACTION": action.name,
    }
    if caller_cwd is not None:
        base["AAT_CALLER_CWD"] = str(caller_cwd)
    declared = {k: v for k, v in secrets.items() if k in tool.secrets}
    return {**declared, **base}


def _user_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # a uid without a passwd entry (some containers)
        return str(Path.home())
