"""What aat's spawner (`webplatform.process.spawner`) and its zygotes (`zygote.py`) say.

Defined once for both sides. This file imports only the standard library: the zygote, run as a
script by its path, loads it as a sibling file, as it loads `landlock.py` and `namespaces.py`.

One call: the spawner sends `CALL` on the zygote's control socket (SOCK_SEQPACKET) carrying
`CALL_FDS` descriptors (the call's stdin, stdout, stderr and a channel, a stream socket), then
the request as one JSON line on the channel. The zygote's forked child answers `{"pid": N}`
once it has taken the call on, confines itself and waits for the go-ahead (`GO`, one byte),
which the spawner sends once the caller's own work for the call is done (the job's row
written): a child that gets anything else exits `EXIT_DROPPED`, having run nothing. In exec
mode (`EXEC_MODE`) a program that cannot be executed is reported as `{"exec_error": ...}`.
The zygote ends the conversation with `{"status": WAIT_STATUS}`, or `{"error": ...}` when it
could not fork. Every message is one JSON line (`line`).
"""

from __future__ import annotations

import json
from typing import Any

# The control message that hands a zygote a call, and how many descriptors it carries.
CALL = b"c"
CALL_FDS = 4
# The go-ahead: the caller's work for the call is done, the child may start the tool.
GO = b"g"
# A child whose call was dropped before its go-ahead exits with this, having run nothing.
EXIT_DROPPED = 125
# In place of an entrypoint: preload nothing, and exec each call's argv (plain calls).
EXEC_MODE = "--exec"
# The longest request a child reads (argv and environment as JSON).
MAX_REQUEST = 64 * 1024 * 1024


def line(message: dict[str, Any]) -> bytes:
    """`message` as the one JSON line either side sends."""
    return json.dumps(message, ensure_ascii=False).encode() + b"\n"
