"""Parse YAML once and keep its node tree, so every validation error can name its line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

# libyaml is about ten times faster than the pure-Python parser, which is what lets a
# registry of a thousand manifests load cold in a fraction of a second.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlProblem(Exception):
    """The text is not YAML, or has a duplicate key; `line` is 1-based when known."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class YamlDoc:
    """Plain Python data plus the node tree it came from, for line lookups."""

    data: Any
    node: yaml.Node | None
    # Lines before the YAML in its file (a SKILL.md front matter starts after `---`).
    line_offset: int = 0

    def line(self, *path: str | int) -> int | None:
        """1-based line of the value at `path` (mapping keys, sequence indexes).

        A present key gives the line of the key itself (`args:`, not its first item); a
        missing one gives the line of the nearest enclosing node, where it has to be added.
        """
        node = self.node
        if node is None:
            return None
        line = node.start_mark.line
        for step in path:
            if isinstance(node, yaml.MappingNode) and isinstance(step, str):
                pair = next(
                    ((k, v) for k, v in node.value if getattr(k, "value", None) == step), None
                )
                if pair is None:
                    break
                line, node = pair[0].start_mark.line, pair[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                if not 0 <= step < len(node.value):
                    break
                node = node.value[step]
                line = node.start_mark.line
            else:
                break
        return line + 1 + self.line_offset


def parse_yaml(text: str, *, line_offset: int = 0) -> YamlDoc:
    """Parse one YAML document; raise YamlProblem with the parser's line on bad input."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        # Only an alias (`*name`) can make a document expand; most manifests have none.
        if node is not None and "*" in text:
            _check_expanded_size(node, line_offset)
        data = _Builder(loader, line_offset).build(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 + line_offset if mark is not None else None
        detail = ", ".join(p.strip() for p in (exc.context, exc.problem) if p)
        raise YamlProblem(f"YAML syntax error: {detail}; fix the YAML on this line", line) from exc
    except yaml.reader.ReaderError as exc:
        # A control character or bad encoding: one line, and the line it is on.
        line = text.count("\n", 0, max(exc.position, 0)) + 1 + line_offset
        detail = str(exc).splitlines()[0]
        raise YamlProblem(f"YAML error: {detail}; remove that character", line) from exc
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise YamlProblem(f"YAML error: {detail}; fix the YAML", None) from exc
    except RecursionError as exc:
        raise YamlProblem("YAML refers to itself through an alias; remove the loop", None) from exc
    finally:
        loader.dispose()
    return YamlDoc(data, node, line_offset)


_STR, _SEQ, _MAP = (f"tag:yaml.org,2002:{t}" for t in ("str", "seq", "map"))

# Far beyond any real manifest, far below what hangs a process: aliases of aliases
# ("billion laughs") expand exponentially, and one such file must not stall the registry.
MAX_EXPANDED_NODES = 100_000


def _check_expanded_size(root: yaml.Node, line_offset: int) -> None:
    """Raise YamlProblem when the document, with every alias expanded, is too large.

    Counts each node once per place it is used, in time linear in the node tree.
    """
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        if total > MAX_EXPANDED_NODES:
            raise YamlProblem(
                f"YAML expands to more than {MAX_EXPANDED_NODES} values (aliases of aliases?); "
                "write the values out instead of nesting aliases",
                node.start_mark.line + 1 + line_offset,
            )
        sizes[id(node)] = total
        return total

    size(root)


class _Builder:
    """Turns a node tree into plain data, rejecting duplicate keys on the way.

    PyYAML's own constructor spends most of a load on generic bookkeeping; manifests are
    mostly strings, lists and mappings, built here directly, and everything else (numbers,
    booleans, dates, merge keys) is handed to the safe constructor. This halves a cold load.
    """

    def __init__(self, loader: yaml.SafeLoader, line_offset: int) -> None:
        self.loader = loader
        self.line_offset = line_offset

    def build(self, node: yaml.Node) -> Any:
        if node.tag == _STR and isinstance(node, yaml.ScalarNode):
            return node.value
        if node.tag == _SEQ and isinstance(node, yaml.SequenceNode):
            return [self.build(item) for item in node.value]
        if (
            node.tag == _MAP
            and isinstance(node, yaml.MappingNode)
            and all(key.tag == _STR for key, _ in node.value)
        ):
            return self.mapping(node)
        # Merge keys, non-string keys and every non-string scalar.
        return self.loader.construct_object(node, deep=True)

    def mapping(self, node: yaml.MappingNode) -> dict[str, Any]:
        # PyYAML silently keeps the last of two equal keys; an author who wrote `args:` twice
        # would lose half their arguments without a word, so it is an error here.
        result: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1 + self.line_offset
            if key.value in lines:
                raise YamlProblem(
                    f"key '{key.value}' appears twice (also on line {lines[key.value]}); "
                    "keep only one",
                    line,
                )
            lines[key.value] = line
            result[key.value] = self.build(value)
        return result
