"""How a call's argument values reach the rule engine exactly (SPEC §20).

Cedar has strings, booleans and four-decimal numbers within about ±9.2e14; an agent can
send any JSON. This module says, for each value, what the engine sees, so that a rule
judges exactly the value the tool will receive, or knows that it cannot:

- `number_proxy(value)`: a number as a Cedar decimal that compares with every number a rule
  may hold (`rule_number_problem`: at most 3 decimal places, within ±1e14) exactly as the
  value itself does: integers of any size and decimals without rounding. NaN has none.
- `cedar_string(text)`: a Cedar string literal for any text (accents, emoji, NUL,
  right-to-left marks); `cedar_encodable(text)` is False for the one text Cedar cannot hold
  (a lone surrogate, which JSON allows).
- `Glob`: a rule's string pattern. `*` matches any run of characters except `/ @ , ;`,
  whitespace and control characters, `?` one such character, `**` any run except control
  characters and line breaks. Matching is linear in the value's length (a bit-parallel
  automaton), so no value an agent sends makes a rule slow.
- `glob_examples(pattern)`: two values a pattern allows and two it does not, for pages.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from functools import cached_property
from typing import Any

# Rule constants: at most this many decimal places, within +-RULE_NUMBER_LIMIT. A call's
# number between two such constants is shown to the engine as the midpoint of a smaller step,
# so it sorts correctly against all of them and equals none.
RULE_DECIMALS = 3
RULE_NUMBER_LIMIT = Decimal(10) ** 14
_STEP = Decimal(1).scaleb(-RULE_DECIMALS)
_HALF = _STEP / 2
_BEYOND = RULE_NUMBER_LIMIT + _HALF


def is_number(value: Any) -> bool:
    """True for a JSON number (an int or a float, not a boolean)."""
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def exact(value: int | float | Decimal) -> Decimal:
    """The number as the tool receives it: an int exactly, a float as the shortest text that
    reads back as it (what JSON carries: `0.1`, `1e+300`), never its binary expansion."""
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) else Decimal(value)
    return Decimal(value)


def rule_number_problem(value: Any) -> str | None:
    """Why `value` cannot stand in a rule's condition, in one line; None when it can."""
    if not is_number(value):
        return None
    number = exact(value)
    if not number.is_finite():
        return f"{value!r} is not a number a call can be compared with"
    if abs(number) > RULE_NUMBER_LIMIT:
        return f"{value!r} is beyond the ±{RULE_NUMBER_LIMIT:,.0f} a rule may name"
    if number != number.quantize(_STEP, rounding=ROUND_FLOOR):
        return f"{value!r} has more than {RULE_DECIMALS} decimal places"
    return None


def number_proxy(value: int | float | Decimal) -> Decimal | None:
    """The decimal the engine compares in place of `value`; None for NaN (no order)."""
    number = exact(value)
    if number.is_nan():
        return None
    if not number.is_finite() or abs(number) > RULE_NUMBER_LIMIT:
        return _BEYOND if number > 0 else -_BEYOND
    floor = number.quantize(_STEP, rounding=ROUND_FLOOR)
    return number if floor == number else floor + _HALF


def cedar_decimal(number: Decimal) -> str:
    """`decimal("…")` for a number of at most four decimal places within Cedar's range."""
    return f'decimal("{number:.4f}")'


def cedar_encodable(text: str) -> bool:
    """Whether Cedar can hold `text` (any Unicode scalar value; not a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def cedar_string(text: str) -> str:
    """`text` as a Cedar string literal: letters, marks, digits, punctuation, symbols and the
    space kept as they are, everything else (controls, NUL, bidi marks) as `\\u{…}`."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == " " or unicodedata.category(char)[0] in "LMNPS":
            out.append(char)
        else:
            out.append(f"\\u{{{ord(char):x}}}")
    out.append('"')
    return "".join(out)


def cedar_value(value: Any) -> str:
    """A rule constant (string, boolean or number) as Cedar text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return cedar_decimal(exact(value))
    return cedar_string(str(value))


def engine_value(value: Any) -> Any:
    """What the engine's context holds for an argument's value, or `UNREPRESENTABLE`; None
    for values no condition compares (lists and objects)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value if cedar_encodable(value) else UNREPRESENTABLE
    if is_number(value):
        proxy = number_proxy(value)
        if proxy is None:
            return UNREPRESENTABLE
        return {"__extn": {"fn": "decimal", "arg": f"{proxy:.4f}"}}
    return None


class _Unrepresentable:
    def __repr__(self) -> str:
        return "UNREPRESENTABLE"


UNREPRESENTABLE: Any = _Unrepresentable()


# -- globs --------------------------------------------------------------------------------

_SEPARATORS = frozenset("/@,;")


def in_segment(char: str) -> bool:
    """Whether `*` and `?` may match `char`: not `/ @ , ;`, whitespace or a control."""
    return char not in _SEPARATORS and not char.isspace() and not _control(char)


def in_line(char: str) -> bool:
    """Whether `**` may match `char`: not a control character or a line break."""
    return not _control(char) and char not in "\u2028\u2029"


def _control(char: str) -> bool:
    return unicodedata.category(char) == "Cc"


def is_glob(text: str) -> bool:
    """Whether a rule's string is a pattern (holds `*` or `?`) rather than a value."""
    return "*" in text or "?" in text


_ONE, _RUN, _LINE = "?", "*", "**"
_CHARS_KEPT = 4096


@dataclass(frozen=True)
class Glob:
    """A rule's string pattern, matched whole and case-sensitively (see the module doc)."""

    pattern: str

    @cached_property
    def tokens(self) -> tuple[str, ...]:
        """Literal characters, `?`, `*` (a run in a segment) and `**` (a run in a line)."""
        tokens: list[str] = []
        i = 0
        while i < len(self.pattern):
            if self.pattern.startswith("**", i):
                while i < len(self.pattern) and self.pattern[i] == "*":
                    i += 1
                tokens.append(_LINE)
                continue
            tokens.append(self.pattern[i])
            i += 1
        return tuple(tokens)

    @cached_property
    def _masks(self) -> tuple[int, int, int]:
        """Bits (one per token) of the wildcards by kind, and of the runs."""
        seg = sum(1 << i for i, t in enumerate(self.tokens) if t in (_ONE, _RUN))
        line = sum(1 << i for i, t in enumerate(self.tokens) if t == _LINE)
        runs = sum(1 << i for i, t in enumerate(self.tokens) if t in (_RUN, _LINE))
        return seg, line, runs

    def _closure(self, states: int) -> int:
        """`states` with every run that may match nothing stepped over."""
        runs = self._masks[2]
        while True:
            more = states | ((states & runs) << 1)
            if more == states:
                return states
            states = more

    @cached_property
    def _by_char(self) -> dict[str, tuple[int, int]]:
        """Per character seen: the tokens it advances past, and the runs it stays in. Kept
        with the pattern, so each rule's pattern learns a character once, not once a call."""
        return {}

    def _step(self, states: int, char: str) -> int:
        moves = self._by_char.get(char)
        if moves is None:
            seg, line, runs = self._masks
            literal = sum(1 << i for i, t in enumerate(self.tokens) if t == char and t not in _FILL)
            accept = literal | (seg if in_segment(char) else 0) | (line if in_line(char) else 0)
            moves = (accept & ~runs, accept & runs)
            if len(self._by_char) < _CHARS_KEPT:  # an agent's alphabet cannot grow it forever
                self._by_char[char] = moves
        advance, stay = moves
        return self._closure(((states & advance) << 1) | (states & stay))

    def matches(self, value: str) -> bool:
        """Whether the whole of `value` matches the pattern."""
        states = self._closure(1)
        for char in value:
            states = self._step(states, char)
            if not states:
                return False
        return bool(states >> len(self.tokens) & 1)


# Fillers tried for each wildcard: the first ones match it, the later ones show what a single
# star refuses (a separator, a space, a line break).
_FILL = {_ONE: ("a", "b"), _RUN: ("ann", "x1"), _LINE: ("a/b c", "q")}
_BREAKS = ("a, b", "a/b", "a b", "a\nb")


def glob_examples(pattern: str) -> tuple[list[str], list[str]]:
    """Two values `pattern` allows and two it does not, each checked against the matcher."""
    glob = Glob(pattern)
    allowed: list[str] = []
    for pick in (0, 1):
        text = "".join(_FILL[t][pick] if t in _FILL else t for t in glob.tokens)
        if glob.matches(text) and text not in allowed:
            allowed.append(text)
    base = allowed[0] if allowed else ""
    refused: list[str] = []
    for candidate in _near_misses(glob, base):
        if not glob.matches(candidate) and candidate not in refused:
            refused.append(candidate)
        if len(refused) == 2:
            break
    return allowed, refused


def _near_misses(glob: Glob, base: str) -> list[str]:
    """Values close to an allowed one: a separator or line break where a wildcard is, the
    value with something more before or after it, another case."""
    out = []
    for filler in _BREAKS:
        out.append("".join(filler if t in _FILL else t for t in glob.tokens))
    out += [f"x, {base}", f"{base}.evil", base.swapcase(), f"{base}\n"]
    return out
