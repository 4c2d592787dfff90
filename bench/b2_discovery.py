"""B2: discovery on a generated registry of 1,000 tools x 10 actions.

Calls go through the SDK's in-memory `Client` on the real bridge (`build_server`), so each
figure is the whole server-side path (registry stat check, discovery, result, serialisation)
without a transport. Cold load is a fresh `RegistryLoader` parsing every manifest.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from mcp import Client

from bench.common import Report, median_ms, ms, temp_home, timed
from webplatform.config import Settings
from webplatform.mcp import build_server
from webplatform.platform import Platform
from webplatform.registry import RegistryLoader
from webplatform.store.models import Surface

TITLE = "discovery on 1,000 tools x 10 actions"
TOOLS, ACTIONS = 1000, 10
ROUNDS = 30
VERBS = ("list", "get", "create", "update", "archive", "export", "import", "count", "find", "sync")
NOUNS = ("invoices", "customers", "tickets", "orders", "reports", "pages", "files", "users")


def manifest(i: int, *, note: str = "") -> str:
    """A valid tool.yaml with ACTIONS actions of three arguments each."""
    lines = [
        f"name: gen-{i:04d}",
        f"description: Generated tool {i} for the discovery benchmark{note}.",
        "version: 0.1.0",
        "runtime: python",
        "entrypoint: main.py",
        "actions:",
    ]
    for a in range(ACTIONS):
        noun = NOUNS[(i + a) % len(NOUNS)]
        lines += [
            f"  - name: {VERBS[a]}-{noun}",
            f"    description: {VERBS[a].title()} {noun} of service {i} (page by page).",
            "    read_only: true" if VERBS[a] in ("list", "get", "count", "find") else "",
            "    args:",
            "      - {name: workspace-id, type: string, required: true, description: Workspace}",
            "      - {name: max-results, type: integer, default: 50, description: Page size}",
            "      - {name: mode, type: string, enum: [fast, full], default: fast}",
        ]
    return "\n".join(line for line in lines if line) + "\n"


def generate(root: Path) -> None:
    """Write the registry under `root`."""
    for i in range(TOOLS):
        folder = root / "tools" / f"gen-{i:04d}"
        folder.mkdir(parents=True)
        (folder / "tool.yaml").write_text(manifest(i))
        (folder / "main.py").write_text("print('{}')\n")


async def measure(report: Report) -> None:
    """Run B2 and add its rows to `report`."""
    with temp_home("b2") as home:
        root = home / "registry"
        generate(root)
        cold = [timed(RegistryLoader([root]).load) for _ in range(5)]
        loaded = RegistryLoader([root]).load()
        assert len(loaded.tools) == TOOLS and not loaded.errors, loaded.errors[:3]
        platform = Platform(Settings(home=home, registry=str(root)))
        server = build_server(platform, surface=Surface.mcp_stdio)
        async with Client(server, mode="legacy") as client:

            async def call(arguments: dict[str, object]) -> float:
                start = time.perf_counter()
                result = await client.call_tool("capabilities", arguments)
                elapsed = time.perf_counter() - start
                assert not result.is_error, result
                return elapsed

            calls = {
                "{}": {},
                "{search}": {"search": "export invoices"},
                "{name, action}": {"name": "gen-0500", "action": f"list-{NOUNS[500 % len(NOUNS)]}"},
            }
            for args in calls.values():  # warm: first call loads the registry
                await call(args)
            samples: dict[str, list[float]] = {k: [] for k in calls}
            for _ in range(ROUNDS):
                for key, args in calls.items():
                    samples[key].append(await call(args))
            edited: list[float] = []
            manifest_path = root / "tools" / "gen-0500" / "tool.yaml"
            for n in range(7):
                manifest_path.write_text(manifest(500, note=f" (edit {n})"))
                edited.append(await call(calls["{name, action}"]))
                described = platform.registry().tools["gen-0500"].description
                assert f"(edit {n})" in described, described
        platform.engine.dispose()
    targets = {"{}": 30.0, "{search}": 20.0, "{name, action}": 5.0}
    for key, limit in targets.items():
        value = median_ms(samples[key])
        report.add(
            f"capabilities {key} (warm)", ms(value), target=f"<= {limit:g} ms", met=value <= limit
        )
    cold_ms = median_ms(cold)
    report.add("cold load (1,000 manifests)", ms(cold_ms), target="<= 1500 ms", met=cold_ms <= 1500)
    edit_ms = median_ms(edited)
    report.add(
        "one manifest edited -> next call", ms(edit_ms), target="<= 50 ms", met=edit_ms <= 50
    )
    report.notes.append(
        f"B2: {TOOLS} tools x {ACTIONS} actions x 3 args; warm medians over {ROUNDS} calls "
        "through the in-memory SDK client; cold load median of 5 fresh loaders; edit median of 7."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
