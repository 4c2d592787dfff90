"""Warm calls (SPEC §12): a `warm: true` python tool runs in a child forked from a warm interpreter.

One warm interpreter (a zygote of `webplatform.process.spawner`, started with the tool's
entrypoint) per tool, keyed by the tool's folder, the interpreter, the mtimes of its manifest
and entrypoint and the namespaces it runs in, so an edited tool gets a new one on its next call
(the old one finishes its calls in flight, then exits). It pre-imports the standard-library and
third-party modules the entrypoint imports, and each call's child runs the entrypoint afresh
(see `confine/zygote.py`): what the tool can observe is what a plain spawn gives it.
"""

from __future__ import annotations

from webplatform.process import spawner
from webplatform.registry.model import ToolSpec


def start(
    tool: ToolSpec, request: spawner.Request, go_ahead: spawner.GoAhead | None = None
) -> spawner.SpawnedProcess | str:
    """Start one call of `tool` in its warm interpreter; the call's process or a one-line reason.

    `request.argv` is the plain call's (`python ENTRYPOINT ACTION ...`); `go_ahead` as in
    `webplatform.process.spawner`.
    """
    argv, view = request.argv, request.view
    entry = tool.entrypoint_path
    zygote = spawner.Zygote(
        key=(
            _slot(tool, view),
            argv[0],
            tool.manifest_path.stat().st_mtime_ns if tool.manifest_path.exists() else 0,
            entry.stat().st_mtime_ns,
            spawner.view_json(view),
        ),
        folder=tool.folder,
        args=[str(spawner.ZYGOTE), str(entry)],
        who=f"the warm interpreter of {tool.name}",
        broken=(
            f"the warm interpreter of {tool.name} exits as soon as it starts; "
            f"run `{argv[0]} {argv[1]}` to see why, or set `warm: false` in its manifest"
        ),
    )
    return spawner.start(zygote, request, go_ahead)


def _slot(tool: ToolSpec, view: spawner.View) -> str:
    """A warm interpreter's place in the pool: its tool's folder, and its namespaces' network
    (`own`, `host`; `none` without namespaces)."""
    return f"{tool.folder}:{view['net'] if view else 'none'}"


def zygote_pid(tool: ToolSpec, network: str | None = None) -> int | None:
    """The pid of `tool`'s warm interpreter while one runs (for tests and diagnostics), in
    namespaces with `network` (by default the one its `network:` gets)."""
    net = network or ("own" if tool.network.none else "host")
    return spawner.pid(f"{tool.folder}:{net}")
