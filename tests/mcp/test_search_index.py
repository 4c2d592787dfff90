"""`capabilities {search}` answers from an index built once per registry version; it must
match exactly what a plain scan of every action finds."""

from __future__ import annotations

import random
from pathlib import Path

from webplatform.mcp.discovery import discover
from webplatform.registry.model import ActionSpec, Registry, ToolSpec
from webplatform.suggest import word_set

NOUNS = ["invoice", "category", "box", "address", "credentials", "sheet", "bus", "policy"]
VERBS = ["list", "export", "get", "delete", "send", "archive"]


def registry(seed: int) -> Registry:
    pick = random.Random(seed)
    tools = {}
    for i in range(60):
        actions = tuple(
            ActionSpec(
                name=f"{pick.choice(VERBS)}-{pick.choice(NOUNS)}{pick.choice(['', 's', 'es'])}",
                description=f"{pick.choice(VERBS).title()} the {pick.choice(NOUNS)} of team {i}"
                + pick.choice(["", " (page by page)", "\nsecond line: categories"]),
            )
            for _ in range(pick.randint(1, 5))
        )
        name = f"{pick.choice(NOUNS)}-tool-{i}"
        tools[name] = ToolSpec(
            kind="tool", name=name, description="", version="1", runtime="python",
            entrypoint="main.py", folder=Path("/nowhere"), manifest_path=Path("/nowhere/t.yaml"),
            actions=actions,
        )  # fmt: skip
    return Registry(tools=tools)


def scanned(reg: Registry, query: str) -> list[tuple[str, str]]:
    """What a scan of every action finds: each query word is one of its words or in its text."""
    words = word_set(query)
    found = []
    for spec in sorted(reg.tools.values(), key=lambda s: s.name):
        for action in spec.actions:
            text = f"{spec.name} {action.name} {action.description}"
            if all(q in word_set(text) or q in text.lower() for q in words):
                found.append((spec.name, action.name))
    return found


def test_the_index_finds_exactly_what_a_scan_finds() -> None:
    queries = [
        "invoice", "invoices", "categories", "category", "list boxes", "box", "es", "2",
        "team 59", "export credentials", "page", "second line", "tool-0", "bus policy", "zzz",
    ]  # fmt: skip
    for seed in range(5):
        reg = registry(seed)
        for query in queries:
            answer = discover(reg, search=query, max_bytes=10**9)
            got = [(m["name"], m["action"]) for m in answer["matches"]]
            expected = scanned(reg, query)
            assert got == expected[:50], (seed, query)
            assert answer["total"] == len(expected), (seed, query)


def test_a_new_registry_version_gets_a_new_index() -> None:
    first, second = registry(1), registry(2)
    for reg in (first, second, first):
        answer = discover(reg, search="invoice", max_bytes=10**9)
        assert [(m["name"], m["action"]) for m in answer["matches"]] == scanned(reg, "invoice")[:50]
