"""Who may do what (SPEC §21): one question, `may(actor, permission, target)`, and nowhere else
spells a role.

The guard below reads the tree: a role name compared anywhere but in
`webplatform.trust.permissions` (Python) or in any template is a second answer to the
authority question, which this test refuses. The store's operator rows are handed the role
vocabulary (the column's values, the first operator's role, one admin always left) as
`permissions.ROLE_BOOK`, so no module is exempt, the store's included.
"""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from webplatform.store.models import Job, JobState, Surface, utcnow
from webplatform.trust.decidability import Standing
from webplatform.trust.permissions import GRANTS, ROLE_BOOK, Decider, Permission, can, may

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
ROLES = frozenset({"admin", "approver", "viewer"})
# The one module that answers.
ANSWERS = {ROOT / "webplatform" / "trust" / "permissions.py"}


def _roles_in(node: ast.AST) -> set[str]:
    """Role names spelled as string constants in `node` (a constant, or a tuple, list or set
    of them)."""
    if isinstance(node, ast.Constant) and node.value in ROLES:
        return {str(node.value)}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_roles_in(e) for e in node.elts)) if node.elts else set()
    return set()


def _python_spellings(path: Path, base: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            names = set().union(*(_roles_in(n) for n in (node.left, *node.comparators)))
            if names:
                found.append(f"{path.relative_to(base)}:{node.lineno}: {sorted(names)}")
    return found


# A role name in a template expression (`role == "admin"`, `role in ("admin", ...)`), or a
# template reading `role` to decide what to show.
_TEMPLATE_ROLE = re.compile(
    r"""\{[%{][^%}]*?(\brole\s*(==|!=|\bin\b|\bnot\b)|["'](admin|approver|viewer)["'])"""
)


def test_no_module_or_template_but_permissions_spells_a_role_in_a_comparison() -> None:
    sources = [
        p
        for package in ("webplatform", "dashboard")
        for p in sorted((ROOT / package).rglob("*.py"))
        if p not in ANSWERS and "migrations" not in p.parts
    ]
    assert len(sources) > 100  # the tree was found
    spelled = [line for p in sources for line in _python_spellings(p)]
    templates = sorted((ROOT / "templates").rglob("*.html"))
    assert templates
    for path in templates:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _TEMPLATE_ROLE.search(line):
                spelled.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert spelled == [], "ask trust.permissions.may instead:\n" + "\n".join(spelled)


def test_the_guard_sees_a_role_compared_in_python_and_in_a_template(tmp_path: Path) -> None:
    # The guard itself: a comparison of the kind it exists to refuse is found.
    module = tmp_path / "m.py"
    module.write_text('def f(role):\n    return role in ("admin", "approver")\n')
    assert _python_spellings(module, tmp_path) == ["m.py:2: ['admin', 'approver']"]
    assert _TEMPLATE_ROLE.search('{% if role == "admin" %}')
    assert _TEMPLATE_ROLE.search('{% if role in ("admin", "approver") %}')
    assert not _TEMPLATE_ROLE.search("{% if can.approve %}")
    assert not _TEMPLATE_ROLE.search("<td>{{ op.role }}</td>")


@pytest.mark.parametrize(
    ("role", "allowed"),
    [
        ("admin", set(Permission)),
        (
            "approver",
            {
                Permission.view,
                Permission.run,
                Permission.approve,
                Permission.deny,
                Permission.edit,
                Permission.allow_sign_in,
            },
        ),
        ("viewer", {Permission.view}),
        (None, set()),
        ("someone", set()),
    ],
)
def test_each_role_is_granted_what_it_was(role: str | None, allowed: set[Permission]) -> None:
    actor = Decider(name="ada", role=role)
    assert {p for p in Permission if may(actor, p)} == allowed
    assert can(actor) == {p.name: p in allowed for p in Permission}


def test_a_forged_operator_row_grants_nothing_whatever_its_role() -> None:
    forged = Decider(name="ada", role="admin", forged="ada's row does not verify")
    assert not any(may(forged, p) for p in Permission)


def _job(**fields: Any) -> Job:
    base: dict[str, Any] = {
        "id": 7,
        "kind": "tool",
        "name": "outbox",
        "action": "send-message",
        "args_json": "{}",
        "args_digest": "d",
        "state": JobState.pending_approval,
        "surface": Surface.mcp_stdio,
        "irreversible": True,
        "expires_at": utcnow() + timedelta(minutes=5),
        "approvals_required": 1,
        "self_approval": True,
        "asked_by_operator": "ada",
    }
    return Job(**(base | fields))


def test_a_job_target_answers_approve_as_decidability_judges_it() -> None:
    ada, bob = Decider(name="ada", role="admin"), Decider(name="bob", role="approver")
    assert may(ada, Permission.approve, Standing(job=_job()))
    # Self-approval off: the asker's role grants approve, the job does not.
    own = Standing(job=_job(self_approval=False))
    assert not may(ada, Permission.approve, own) and may(bob, Permission.approve, own)
    # Already given: a second approval by the same operator is not theirs to give.
    twice = Standing(job=_job(approvals_required=2), given=("bob",))
    assert not may(bob, Permission.approve, twice) and may(ada, Permission.approve, twice)
    # Expired: nobody approves, anyone who decides may still deny.
    late = Standing(job=_job(expires_at=utcnow() - timedelta(seconds=1)))
    assert not may(ada, Permission.approve, late) and may(ada, Permission.deny, late)
    # A viewer is refused before the job is asked.
    assert not may(Decider(name="vic", role="viewer"), Permission.deny, Standing(job=_job()))


def test_the_store_is_handed_the_roles_and_spells_none() -> None:
    # The operator rows' vocabulary is trust's table, handed down: the store module that keeps
    # the rows names no role at all, not even outside a comparison.
    path = ROOT / "webplatform" / "store" / "operators.py"
    spelled = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in ROLES
    ]
    assert spelled == []
    assert ROLE_BOOK.roles == tuple(GRANTS)
    assert ROLE_BOOK.keep == {r for r in GRANTS if Permission.manage_operators in GRANTS[r]}


def test_the_command_lines_role_choices_are_the_role_book() -> None:
    """`aat operator --role` lists its choices in the parser, which must not import trust (an
    `aat --help` loads no database code): they are the role book's roles, no more or fewer."""
    from webplatform.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    operator = commands.choices["operator"]
    (role,) = [a for a in operator._actions if a.dest == "role"]
    assert tuple(role.choices) == ROLE_BOOK.roles
