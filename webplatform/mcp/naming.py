"""The bridge's fixed names: the seven MCP tools, their titles, the resource and `_meta` keys.

These names are contracts with MCP clients (SPEC section 5); clients add their own prefix
(`aat_run_tool`). Keep them here, in one place, so the schemas, the server and the tests
agree on every spelling. The tools' arguments are models in `arguments`.
"""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

from webplatform.mcp import protocol
from webplatform.registry.model import run_tool_name

CAPABILITIES: Final = "capabilities"
RUN_TOOL: Final = run_tool_name("tool", confirmed=False)
RUN_AGENT: Final = run_tool_name("agent", confirmed=False)
RUN_TOOL_CONFIRMED: Final = run_tool_name("tool", confirmed=True)
RUN_AGENT_CONFIRMED: Final = run_tool_name("agent", confirmed=True)
GET_SKILL: Final = "get_skill"
JOB_STATUS: Final = "job_status"

TOOL_NAMES: Final[tuple[str, ...]] = (
    CAPABILITIES,
    RUN_TOOL,
    RUN_AGENT,
    RUN_TOOL_CONFIRMED,
    RUN_AGENT_CONFIRMED,
    GET_SKILL,
    JOB_STATUS,
)

# `server/discover` result `_meta` key for the tools digest (shared by both surfaces).
TOOLS_DIGEST_META_KEY: Final = protocol.TOOLS_DIGEST_META_KEY

# The level-triggered resource: this client's jobs waiting for an operator.
PENDING_APPROVALS_URI: Final = "aat://approvals/pending"

# Registry names as manifests allow them; anything else (`../x`, spaces) cannot name anything.
NAME_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9-]*$")
Kind = Literal["tool", "agent", "skill"]
KINDS: Final[tuple[str, ...]] = get_args(Kind)

# What clients show a person above a call, short enough for a terminal's line (Claude Code
# prints it, cut to the width, before the arguments).
TITLES: Final[dict[str, str]] = {
    CAPABILITIES: "Find tools",
    RUN_TOOL: "Run a tool",
    RUN_AGENT: "Run an agent",
    RUN_TOOL_CONFIRMED: "Run a tool, with approval",
    RUN_AGENT_CONFIRMED: "Run an agent, with approval",
    GET_SKILL: "Read a skill",
    JOB_STATUS: "Check a job",
}

DESCRIPTIONS: Final[dict[str, str]] = {
    CAPABILITIES: (
        "Discover what aat can run, narrowest first: {} lists every tool, agent and skill; "
        "{search} finds actions; {name, action} gives one action's arguments and the exact call "
        "to copy; {name} gives a whole schema (or an action index when it is large)."
    ),
    RUN_TOOL: (
        "Run a reversible tool action now and return its JSON result. An irreversible action is "
        "refused with status approval_required: call run_tool_confirmed instead."
    ),
    RUN_AGENT: (
        "Run a reversible agent action now. An irreversible one is refused with status "
        "approval_required: call run_agent_confirmed instead."
    ),
    RUN_TOOL_CONFIRMED: (
        "Run a tool action that may be irreversible. Reversible: runs now. Irreversible: queued "
        "for a human operator's approval in the dashboard; waits a while (sending progress), "
        "then answers with the outcome or status pending_approval (with approvals_needed) and a "
        "job id for job_status. Pass reason: why you want this call, so the operator can decide."
    ),
    RUN_AGENT_CONFIRMED: (
        "Same as run_tool_confirmed, for agents: irreversible actions wait for an operator. "
        "Pass reason: why you want this call."
    ),
    GET_SKILL: "Read a skill: its markdown instructions.",
    JOB_STATUS: (
        "The state of a job and, once finished, its result. With wait_s, waits up to that many "
        "seconds for a change (approval, denial, completion) before answering. Without job, "
        "lists your recent jobs (for a call whose answer you did not get)."
    ),
}


def valid_name(name: str) -> bool:
    """True when `name` could name a registry entry (no paths, no spaces, lower-case)."""
    return bool(NAME_PATTERN.match(name))
