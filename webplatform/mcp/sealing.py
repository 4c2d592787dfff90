"""The bridge's sealing key: what it hands a client to echo back survives a restart.

The key is 32 random bytes in `AAT_HOME/mcp-state.key` (0600, made once by the first bridge
process that needs it; processes starting together agree on one). Every bridge with the same
`AAT_HOME` (`aat mcp`, `aat serve`, another `aat serve` on the same database) seals and opens
with it, so:

- the 2026-07-28 `input_required` state the SDK seals (`RequestStateSecurity`) is accepted by
  the retry even after `aat serve` restarted, or when it reaches another process;
- task ids of the Tasks extension (`tasks.py`) are sealed with a key derived from it for that
  purpose alone, so neither kind of token can pass for the other.

State sealed for one agent token opens only for that token (the principal binding).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import AESGCMRequestStateCodec, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from webplatform import keyfiles
from webplatform.mcp.protocol import agent_name

KEY_FILE = "mcp-state.key"
KEY_BYTES = 32
# How long an `input_required` round's state stays valid (the SDK's default).
STATE_TTL_S = 600.0
_TASK_ID_PURPOSE = b"aat/mcp/task-id/v1"
_SDK_REJECTION = "invalid_request_state"
BAD_STATE = (
    "Invalid or expired requestState: it was changed, is older than {ttl} minutes, or was "
    "sealed by an aat with another AAT_HOME; call the tool again without requestState"
)


def state_key(home: Path) -> bytes:
    """The sealing key kept in `home`, created (0600) if there is none yet."""
    path = home / KEY_FILE
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Another process that linked its key first wins: all of them then read that one.
        keyfiles.write(path, secrets.token_bytes(KEY_BYTES), mode=0o600, replace=False)
    key = keyfiles.read_private(path)
    if len(key) != KEY_BYTES:
        raise keyfiles.KeyFileError(
            f"{path} is not an aat sealing key ({len(key)} bytes, not {KEY_BYTES}); move it "
            "away and restart (a new one is made; calls waiting on the old one start over)"
        )
    return key


def request_state_security(key: bytes) -> RequestStateSecurity:
    """The SDK's policy for `input_required` state, sealed under `key`, bound to the agent
    token that asked (none on stdio)."""
    return RequestStateSecurity(keys=[key], ttl=STATE_TTL_S, bind_principal=_principal)


def task_id_codec(key: bytes) -> AESGCMRequestStateCodec:
    """The authenticated encryption for task ids: a key derived from `key` for them alone."""
    derived = hmac.new(key, _TASK_ID_PURPOSE, hashlib.sha256).digest()
    return AESGCMRequestStateCodec([derived])


def explain_rejected_state() -> Any:
    """Middleware (outside the SDK's state boundary) that turns its terse refusal of a
    tampered, expired or foreign `requestState` into one line saying what to do."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except MCPError as exc:
            data = exc.error.data
            if isinstance(data, dict) and data.get("reason") == _SDK_REJECTION:
                message = BAD_STATE.format(ttl=int(STATE_TTL_S // 60))
                raise MCPError(code=exc.error.code, message=message, data=data) from None
            raise

    return middleware


def _principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    return agent_name(ctx)
