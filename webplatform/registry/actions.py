"""Validate the `actions:` list of a manifest: names, flags, arguments, types, defaults."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from webplatform.registry.checks import Collector, Where, did_you_mean
from webplatform.registry.model import ARG_TYPES, ActionSpec, ArgSpec, ArgType, matches_type
from webplatform.registry.previews import preview_problems
from webplatform.registry.verbs import irreversible_verbs_in

ACTION_KEYS = (
    "name",
    "description",
    "read_only",
    "reversible",
    "timeout_s",
    "args",
    "output_schema",
    "approvals",
    "self_approval",
    "preview",
)
ARG_KEYS = ("name", "type", "required", "description", "default", "enum", "secret")

# Action names become CLI words and MCP `action` values; dots are allowed because the gate
# splits on them. Argument names are passed verbatim as `--name`, so no dots or spaces.
ACTION_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ARG_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_NAME_CHARS = {ACTION_NAME_RE: "'-', '_' and '.'", ARG_NAME_RE: "'-' and '_'"}


class ActionCheck(Collector):
    """Checks for everything under `actions:`; the manifest check builds on it."""

    def actions(self, data: dict[Any, Any], tool_name: str) -> tuple[ActionSpec, ...]:
        """The `actions:` list: non-empty, no two actions with one name."""
        raw = data.get("actions")
        if not isinstance(raw, list) or not raw:
            self.fail(
                "the manifest needs `actions:`, a list with at least one `- name: ...` entry",
                ("actions",),
            )
            return ()
        specs: list[ActionSpec] = []
        first_line: dict[str, int | None] = {}
        index_of: dict[str, int] = {}
        errors_before = len(self.errors)
        for i, item in enumerate(raw):
            where: Where = ("actions", i)
            if not isinstance(item, dict):
                self.fail(f"action #{i + 1} must be a mapping with at least `name:`", where)
                continue
            name = item.get("name")
            if isinstance(name, str) and name in first_line:
                self.fail(
                    f"action '{name}' is defined twice (also on line {first_line[name]}); "
                    "rename or remove one",
                    (*where, "name"),
                )
                continue
            if isinstance(name, str):
                first_line[name] = self.doc.line(*where, "name") if self.doc else None
                index_of[name] = i
            spec = self.action(item, where, tool_name, i)
            if spec is not None:
                specs.append(spec)
        # Links between actions are judged once each action is right on its own: an action
        # with a broken argument would otherwise be reported twice, once as a bad preview.
        if len(self.errors) == errors_before:
            self.preview_links(tool_name, specs, index_of)
        return tuple(specs)

    def preview_links(
        self, tool_name: str, specs: list[ActionSpec], index_of: dict[str, int]
    ) -> None:
        """Each `preview:` names a read-only action that takes the same arguments (SPEC §16)."""
        for name, problem in preview_problems(tool_name, specs).items():
            self.fail(problem, ("actions", index_of[name], "preview"))

    def action(
        self, item: dict[Any, Any], where: Where, tool_name: str, index: int
    ) -> ActionSpec | None:
        """One action mapping, or None when it is too broken to describe."""
        raw_name = item.get("name")
        label = f"action '{raw_name}'" if isinstance(raw_name, str) else f"action #{index + 1}"
        self.unknown_keys(item, ACTION_KEYS, label, where)
        name = self.valid_name(item, ACTION_NAME_RE, label, where)
        description = self.text(item, "description", label, where, required=False) or ""
        read_only = self.flag(item, "read_only", label, where)
        reversible = self.flag(item, "reversible", label, where)
        timeout_s = self.timeout(item, label, where)
        args = self.args(item, label, where)
        output_schema = self.output_schema(item, label, where)
        approvals = self.approvals(item, label, where)
        self_approval = self.flag(item, "self_approval", label, where)
        preview = self.text(item, "preview", label, where, required=False)
        if name is None:
            return None
        self.gate_flags(tool_name, name, read_only, reversible, where)
        return ActionSpec(
            name,
            description,
            bool(read_only),
            reversible,
            timeout_s,
            args,
            output_schema,
            approvals=approvals,
            self_approval=self_approval,
            preview=preview,
        )

    def approvals(self, item: dict[Any, Any], label: str, where: Where) -> int | None:
        """`approvals`: how many distinct operators must approve, an integer of at least 1."""
        value = item.get("approvals")
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            self.fail(
                f"`approvals` of {label} must be a whole number of operators, 1 or more "
                f"(e.g. approvals: 2), not {value!r}",
                (*where, "approvals"),
            )
            return None
        return value

    def gate_flags(
        self, tool: str, action: str, read_only: bool | None, reversible: bool | None, where: Where
    ) -> None:
        """Reject `read_only`/`reversible` flags that contradict each other or the verbs."""
        # The flags may only make an action stricter than its name; anything that tries to
        # loosen it is a contradiction the author must resolve, not something to guess about.
        label = f"action '{action}'"
        if read_only and reversible is False:
            self.fail(
                f"{label} says both read_only: true and reversible: false; a read-only "
                "action is reversible, so drop one of them",
                (*where, "reversible"),
            )
        in_action, in_tool = irreversible_verbs_in(action), irreversible_verbs_in(tool)
        if not (in_action or in_tool):
            return
        whose = (
            f"the action name has '{in_action[0]}'"
            if in_action
            else (f"the {self.kind} name '{tool}' has '{in_tool[0]}'")
        )
        rename = "the action" if in_action else f"the {self.kind}"
        if read_only:
            self.fail(
                f"{label} is marked read_only: true but {whose}, which makes it "
                f"irreversible; rename {rename} or drop read_only",
                (*where, "read_only"),
            )
        if reversible is True:
            self.fail(
                f"{label} says reversible: true but {whose}, which makes it irreversible "
                "and cannot be loosened; drop `reversible: true`",
                (*where, "reversible"),
            )

    def timeout(self, item: dict[Any, Any], label: str, where: Where) -> float | None:
        """`timeout_s`: a positive, finite number of seconds."""
        value = item.get("timeout_s")
        if value is None:
            return None
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value <= 0:
            self.fail(
                f"`timeout_s` of {label} must be a positive number of seconds, not {value!r}",
                (*where, "timeout_s"),
            )
            return None
        return float(value)

    def output_schema(self, item: dict[Any, Any], label: str, where: Where) -> str | None:
        """`output_schema` as text; a mapping or list is stored as JSON text."""
        value = item.get("output_schema")
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, dict | list):
            # A structured schema is kept as JSON text so every surface shows the same string.
            return json.dumps(value, ensure_ascii=False)
        self.fail(
            f"`output_schema` of {label} must be text or a mapping, not {value!r}",
            (*where, "output_schema"),
        )
        return None

    def args(self, item: dict[Any, Any], label: str, where: Where) -> tuple[ArgSpec, ...]:
        """The `args:` list of one action: no two arguments with one name."""
        raw = item.get("args")
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.fail(
                f"`args` of {label} must be a list of `{{name: ..., type: ...}}` entries",
                (*where, "args"),
            )
            return ()
        specs: list[ArgSpec] = []
        seen: set[str] = set()
        for j, arg in enumerate(raw):
            spec = self.arg(arg, label, (*where, "args", j))
            if spec is not None and spec.name in seen:
                self.fail(
                    f"argument '{spec.name}' of {label} is defined twice; rename or remove one",
                    (*where, "args", j, "name"),
                )
            elif spec is not None:
                seen.add(spec.name)
                specs.append(spec)
        return tuple(specs)

    def valid_name(
        self,
        item: dict[Any, Any],
        pattern: re.Pattern[str],
        label: str,
        where: Where,
        *,
        missing: str | None = None,
    ) -> str | None:
        """The required `name:` of an action or argument (`missing` names the item when it
        has none, default `label`); None, with an error, when it does not match `pattern`."""
        name = self.text(item, "name", missing or label, where, required=True)
        if name is not None and not pattern.fullmatch(name):
            self.fail(
                f"{label} has an invalid name; use letters, digits, {_NAME_CHARS[pattern]}, "
                "starting with a letter or digit",
                (*where, "name"),
            )
            return None
        return name

    def arg(self, arg: Any, action_label: str, where: Where) -> ArgSpec | None:
        """One argument mapping: name verbatim, type, flags, enum and a default that fits."""
        if not isinstance(arg, dict):
            self.fail(
                f"each argument of {action_label} must be a mapping like "
                "`{name: path, type: string}`",
                where,
            )
            return None
        raw_name = arg.get("name")
        label = f"argument '{raw_name}' of {action_label}"
        self.unknown_keys(arg, ARG_KEYS, label, where)
        # Never rewritten: the spelling in the manifest is the spelling agents must use.
        name = self.valid_name(
            arg, ARG_NAME_RE, label, where, missing=f"an argument of {action_label}"
        )
        arg_type = self.arg_type(arg, label, where)
        required = self.flag(arg, "required", label, where)
        secret = self.flag(arg, "secret", label, where)
        description = self.text(arg, "description", label, where, required=False) or ""
        enum = self.enum(arg, arg_type, label, where)
        default = arg.get("default")
        if default is not None and arg_type is not None:
            if not matches_type(default, arg_type):
                self.fail(
                    f"default {default!r} of {label} is not of type {arg_type}; "
                    "fix the default or the type",
                    (*where, "default"),
                )
            elif enum is not None and default not in enum:
                self.fail(
                    f"default {default!r} of {label} is not one of its enum values "
                    f"{list(enum)}; pick one of them",
                    (*where, "default"),
                )
        if name is None or arg_type is None:
            return None
        return ArgSpec(name, arg_type, bool(required), description, default, enum, bool(secret))

    def arg_type(self, arg: dict[Any, Any], label: str, where: Where) -> ArgType | None:
        """`type:`, required and one of ARG_TYPES."""
        value = arg.get("type")
        if value is None:
            self.fail(
                f"{label} has no `type`; add `type:` with one of {', '.join(ARG_TYPES)}", where
            )
            return None
        if value not in ARG_TYPES:
            self.fail(
                f"{label} has unknown type '{value}'{did_you_mean(str(value), ARG_TYPES)}",
                (*where, "type"),
            )
            return None
        return value  # type: ignore[no-any-return]

    def enum(
        self, arg: dict[Any, Any], arg_type: ArgType | None, label: str, where: Where
    ) -> tuple[Any, ...] | None:
        """`enum:`, a non-empty list whose values are of the argument's type."""
        value = arg.get("enum")
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            self.fail(
                f"`enum` of {label} must be a non-empty list of allowed values, "
                "e.g. `enum: [fast, full]`",
                (*where, "enum"),
            )
            return None
        if arg_type is not None:
            for k, choice in enumerate(value):
                if not matches_type(choice, arg_type):
                    self.fail(
                        f"enum value {choice!r} of {label} is not of type {arg_type}; "
                        "fix the value or the type",
                        (*where, "enum", k),
                    )
        return tuple(value)
