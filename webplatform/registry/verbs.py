"""The irreversible verbs and how a name is split into words: the single source of the list.

This lives in the registry package, not in `gate.py`, because the layer contract lets the gate
import the registry but not the other way round, and the loader needs the same words to reject
manifests that contradict them (`read_only: true` on `delete-files`). `gate.py` re-exports both
names; nothing else should keep its own copy of the list.
"""

from __future__ import annotations

import re

# A verb belongs here when the action it names, once done, cannot be taken back by the agent:
# it leaves the machine (send, post, push), moves money (pay, charge, refund), or destroys or
# overwrites data (delete, wipe, truncate). When in doubt a verb goes IN: a false "irreversible"
# costs the operator one click, a false "reversible" runs something nobody approved.
IRREVERSIBLE_VERBS: frozenset[str] = frozenset(
    {
        # From the specification.
        "send", "delete", "remove", "pay", "post", "publish", "issue", "transfer",
        "purge", "drop", "destroy", "revoke", "submit",
        # Destroying or overwriting data.
        "wipe", "erase", "truncate", "overwrite", "shred", "expunge", "reset", "rm", "del",
        # Stopping things that cannot simply be resumed.
        "kill", "terminate", "shutdown",
        # Cancelling a payment, order or subscription usually cannot be undone (an order
        # cannot be "un-cancelled"), so it counts, even though cancelling sounds harmless.
        "cancel", "unsubscribe",
        # Changing what other people see or run.
        "deploy", "merge", "push", "upload", "reply", "forward", "share", "invite",
        "notify", "broadcast",
        # Money.
        "refund", "charge", "withdraw", "buy", "purchase", "sell", "spend",
    }
)  # fmt: skip
# Deliberately left out: `archive` (undone by unarchive), `commit` (a local commit is undone by
# a reset; pushing it is `push`), `close`, `disable`, `uninstall` (each has an obvious inverse),
# and words that are nouns as often as verbs, such as `email`, `order`, `message`, `release`
# (`release-notes`) or `trade` (`trade-history`), which name read-only tools just as often.

# Words are split on every non-alphanumeric character (the spec's `-`, `_`, `.` and anything
# else), between camelCase humps and between letters and digits: `sendMessage`, `send2` and
# `SEND_ALL` must all show the `send` in them. Splitting more finely can only find more verbs,
# never fewer, so it cannot loosen the gate.
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def name_words(name: str) -> list[str]:
    """Split a name into lowercase words: `send-Message_v2` -> send, message, v, 2."""
    words: list[str] = []
    for part in _SEPARATORS.split(name):
        words.extend(w.lower() for w in _WORD.findall(part))
    return words


def irreversible_verbs_in(*names: str) -> list[str]:
    """The irreversible verbs found as whole words in any of `names`, in order."""
    return [w for name in names for w in name_words(name) if w in IRREVERSIBLE_VERBS]
