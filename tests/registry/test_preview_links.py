"""`preview:` on an action (SPEC §16): what the loader accepts, and each refusal with its line."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from webplatform.registry import ManifestError, Registry

if TYPE_CHECKING:
    from tests.registry.conftest import RegistryDir

HEAD = "name: mail\ndescription: d\nruntime: python\nentrypoint: main.py\nactions:\n"
SEND = """\
  - name: send-message
    preview: {preview}
    args:
      - {{name: to, type: string, required: true}}
      - {{name: count, type: integer}}
      - {{name: mode, type: string, enum: [fast, full]}}
"""
DRAFT = """\
  - name: draft
    read_only: true
    args:
      - {name: to, type: string, required: true}
      - {name: count, type: number}
      - {name: mode, type: string, enum: [fast, full, slow]}
"""


def only_error(registry: Registry) -> ManifestError:
    assert len(registry.errors) == 1, [str(e) for e in registry.errors]
    return registry.errors[0]


def test_a_read_only_action_taking_the_same_arguments_is_a_preview(reg: RegistryDir) -> None:
    reg.tool("mail", HEAD + SEND.format(preview="draft") + DRAFT)
    registry = reg.load()
    assert registry.errors == ()
    send = registry.tools["mail"].action("send-message")
    assert send is not None and send.preview == "draft"


def test_the_example_outbox_previews_send_and_delete() -> None:
    from webplatform.config import EXAMPLES_ROOT
    from webplatform.registry import RegistryLoader

    outbox = RegistryLoader([EXAMPLES_ROOT]).load().tools["outbox"]
    send, delete = outbox.action("send-message"), outbox.action("delete-messages")
    assert send is not None and send.preview == "preview-message"
    assert delete is not None and delete.preview == "preview-deletion"
    for name in ("preview-message", "preview-deletion"):
        action = outbox.action(name)
        assert action is not None and action.read_only


@pytest.mark.parametrize(
    ("actions", "words"),
    [
        # Naming no action at all, with the nearest name offered.
        (SEND.format(preview="drafts") + DRAFT, ["names no action", "did you mean 'draft'"]),
        # Itself: that would run the call before anyone approved it.
        (SEND.format(preview="send-message") + DRAFT, ["cannot preview itself"]),
        # An action that may change something.
        (
            SEND.format(preview="draft") + DRAFT.replace("    read_only: true\n", ""),
            ["must be read-only", "read_only: true"],
        ),
        # Missing one of the action's arguments.
        (
            SEND.format(preview="draft")
            + DRAFT.replace("      - {name: count, type: number}\n", ""),
            ["does not take argument 'count'"],
        ),
        # The same argument with another type.
        (
            SEND.format(preview="draft")
            + DRAFT.replace("count, type: number", "count, type: string"),
            ["argument 'count' is integer in the action but string in its preview"],
        ),
        # An enum narrower than the action's.
        (
            SEND.format(preview="draft") + DRAFT.replace("[fast, full, slow]", "[fast]"),
            ["argument 'mode'", "enum"],
        ),
        # Requiring what the action may be called without.
        (
            SEND.format(preview="draft")
            + DRAFT
            + "      - {name: cc, type: string, required: true}\n",
            ["requires argument 'cc'"],
        ),
    ],
    ids=[
        "unknown",
        "itself",
        "not-read-only",
        "missing-arg",
        "other-type",
        "narrow-enum",
        "extra-required",
    ],
)
def test_a_bad_preview_is_refused_on_its_line(
    reg: RegistryDir, actions: str, words: list[str]
) -> None:
    path = reg.tool("mail", HEAD + actions)
    error = only_error(reg.load())
    assert error.path == path and error.line == 7  # the `preview:` line
    for word in words:
        assert word in error.message, error.message


def test_only_an_irreversible_action_has_a_preview(reg: RegistryDir) -> None:
    reg.tool(
        "mail",
        HEAD
        + "  - name: list-all\n    read_only: true\n    preview: draft\n"
        + DRAFT.replace("required: true", "required: false"),
    )
    error = only_error(reg.load())
    assert error.line == 8 and "only an irreversible action has a preview" in error.message


def test_reversible_false_makes_an_action_irreversible_enough_for_a_preview(
    reg: RegistryDir,
) -> None:
    reg.tool(
        "mail",
        HEAD + "  - name: archive\n    reversible: false\n    preview: peek\n"
        "  - name: peek\n    read_only: true\n",
    )
    assert reg.load().errors == ()


def test_a_preview_naming_a_broken_action_reports_only_that_action(reg: RegistryDir) -> None:
    reg.tool(
        "mail",
        HEAD + SEND.format(preview="draft") + DRAFT.replace("type: number", "type: nombre"),
    )
    error = only_error(reg.load())
    assert "nombre" in error.message
