"""Where a tool's declared secrets come from: the environment first, then the OS keyring.

Values are returned only to the caller that passes them to the tool's process; nothing here
logs, prints or stores them. Callers that only need to show readiness use `secret_status`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from webplatform.registry.model import ToolSpec

# Secrets are stored in the keyring under this service name: `keyring set aat GITHUB_TOKEN`.
KEYRING_SERVICE = "aat"

log = logging.getLogger(__name__)


def _lookup(name: str) -> str | None:
    # An empty variable counts as unset: `export TOKEN=` is how people clear one.
    value = os.environ.get(name)
    if value:
        return value
    try:
        # Imported on first use: most registries declare no secrets, and the keyring's
        # backends cost every `aat mcp` start tens of milliseconds and megabytes otherwise.
        import keyring

        stored = keyring.get_password(KEYRING_SERVICE, name)
    except Exception as exc:
        # No keyring backend (a headless server, a container) is normal, and a broken one
        # (locked D-Bus, bad config) must not take the registry down: the secret is missing.
        # Only the name and the error type are logged, never anything the backend returned.
        log.debug("keyring lookup for %s failed: %s", name, type(exc).__name__)
        return None
    return stored or None


def secret_present(name: str) -> bool:
    """Whether secret `name` is set in the environment or the OS keyring (never its value)."""
    return _lookup(name) is not None


def resolve_secrets(names: Sequence[str]) -> dict[str, str]:
    """The values of the secrets in `names` that are set; missing ones are left out."""
    found: dict[str, str] = {}
    for name in names:
        value = _lookup(name)
        if value is not None:
            found[name] = value
    return found


def secret_status(tool: ToolSpec) -> dict[str, bool]:
    """For each secret `tool` declares, whether it is present (for readiness badges)."""
    return {name: secret_present(name) for name in tool.secrets}
