"""`python -m bench.variant SIDE ARGS...`: `aat ARGS` as shipped, or with one feature taken out.

A benchmark side only, never a way to run aat: both sides start through this module, so they
import the same modules in the same order and differ only in what SIDE takes out.

- `as-shipped`: nothing changed.
- `without-limits`: no SPEC §20 limits on tool calls. Each call's child is forked straight
  from its zygote, as before the limits existed, instead of as pid 1 of a PID namespace of its
  own (forked ahead of the call, with its own `/proc`, a pid cap and a second fork for the tool
  under a reaper that counts its processes); and the call's request carries no `limits`, so no
  resource limits are set and the scratch folder is an ordinary folder, not a sized tmpfs.
  Everything else (user, mount and network namespaces, Landlock) is as shipped.
- `pid-namespace-only`: the PID namespace and its reaper as shipped, but no `limits` in the
  request (no rlimits, no sized scratch tmpfs, no pid cap, no counting): splits what the
  limits cost between the namespace and the limits held in it (bench/NOTES.md).

The zygote is a script of its own (`confine/zygote.py`), run without aat; the `without-limits`
side has the spawner start a copy of a few lines that imports it from its folder and serves
calls with `own_pids` off. A check below fails loudly if the names this relies on move, so a
refactor cannot leave the side silently measuring the shipped code.
"""

from __future__ import annotations

import atexit
import gc
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

SIDES = ("as-shipped", "without-limits", "pid-namespace-only")

# The zygote of the `without-limits` side: the shipped one, its calls forked without a PID
# namespace of their own. Run as a script, with `-S` in exec mode, like the shipped one.
_ZYGOTE = """\
import sys
sys.path[0] = {confine!r}
import zygote
_serve = zygote.serve
def serve(control, refusal=None, *, own_pids=False):
    return _serve(control, refusal, own_pids=False)
zygote.serve = serve
zygote.main()
"""


def without_limits() -> None:
    """Take SPEC §20's limits out of every tool call this process makes (see the docstring)."""
    from webplatform.process import spawner
    from webplatform.process.confine import spawn_protocol

    confine = Path(spawn_protocol.__file__).resolve().parent
    assert confine / "zygote.py" == spawner.ZYGOTE, spawner.ZYGOTE
    shipped_zygote = spawner.ZYGOTE.read_text()
    for needed in ("def serve(", "own_pids: bool = False", "def main("):
        assert needed in shipped_zygote, f"zygote.py no longer has {needed!r}"
    folder = Path(tempfile.mkdtemp(prefix="aat-bench-zygote-"))
    atexit.register(shutil.rmtree, folder, True)
    script = folder / "zygote_without_limits.py"
    script.write_text(_ZYGOTE.format(confine=str(confine)))
    spawner.ZYGOTE = script
    without_limit_values()


def without_limit_values() -> None:
    """Send each call's request without its `limits` (see the docstring)."""
    from webplatform.process.confine import jail

    shipped = jail.Jail.request

    def request(self: jail.Jail) -> dict[str, Any]:
        asked = shipped(self)
        assert "limits" in asked, "the call's request no longer carries `limits`"
        return {**asked, "limits": None}

    jail.Jail.request = request  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    """Run `aat ARGV[1:]` as side ARGV[0]; the exit code."""
    if not argv or argv[0] not in SIDES:
        print(f"usage: python -m bench.variant {{{','.join(SIDES)}}} ARGS...", file=sys.stderr)
        return 2
    gc.disable()  # as `aat mcp` in process does before its imports (webplatform/cli)
    from webplatform.process import spawner  # noqa: F401 - the same imports on both sides
    from webplatform.process.confine import jail  # noqa: F401

    if argv[0] == "without-limits":
        without_limits()
    elif argv[0] == "pid-namespace-only":
        without_limit_values()
    from webplatform.cli import main as aat

    return aat(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
