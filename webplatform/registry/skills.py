"""Read one SKILL.md: YAML front matter (name, description) between `---` lines, then markdown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webplatform.registry.checks import Collector
from webplatform.registry.model import ManifestError, SkillSpec
from webplatform.registry.yamldoc import YamlProblem, parse_yaml

# The Agent Skills format allows these besides name and description; accepting them lets a
# skill written for another client load unchanged, while a typo is still reported.
SKILL_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")

_FENCE = "---"


@dataclass(frozen=True)
class SkillResult:
    """A loaded skill or its errors."""

    spec: SkillSpec | None
    errors: tuple[ManifestError, ...]


def load_skill(path: Path) -> SkillResult:
    """Read and validate one SKILL.md; never raises for a bad file, reports it instead."""
    check = Collector("skill", path.parent.name, path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        check.fail("SKILL.md is not valid UTF-8; save it with UTF-8 encoding")
        return SkillResult(None, tuple(check.errors))
    except OSError as exc:
        check.fail(f"cannot read SKILL.md ({exc.strerror}); check that it is a readable file")
        return SkillResult(None, tuple(check.errors))
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != _FENCE:
        check.fail(
            "SKILL.md has no front matter; start it with a '---' line, then `name:` and "
            "`description:`, then another '---' line",
            line=1,
        )
        return SkillResult(None, tuple(check.errors))
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == _FENCE), None)
    if end is None:
        check.fail("the front matter is never closed; add a '---' line after it", line=1)
        return SkillResult(None, tuple(check.errors))
    try:
        # Offset 1: the opening `---` is line 1, so the first YAML line is line 2.
        doc = parse_yaml("".join(lines[1:end]), line_offset=1)
    except YamlProblem as exc:
        check.fail(exc.message, line=exc.line)
        return SkillResult(None, tuple(check.errors))
    if not isinstance(doc.data, dict):
        check.fail("the front matter must be a mapping with `name:` and `description:`", line=2)
        return SkillResult(None, tuple(check.errors))
    check.doc = doc
    check.unknown_keys(doc.data, SKILL_KEYS, "the front matter", ())
    name = check.folder_name(doc.data, path.parent.name, "the front matter")
    description = check.text(doc.data, "description", "the front matter", (), required=True)
    if check.errors or name is None or description is None:
        return SkillResult(None, tuple(check.errors))
    body = "".join(lines[end + 1 :]).lstrip("\n")
    return SkillResult(SkillSpec(name, description, path, body), ())
