"""A tool call as an operating-system process.

- `runner`: the one subprocess runner: a call in, a `RunResult` out.
- `launch`: the argv (never a shell) and the whole environment a tool starts with.
- `spawner`: the pre-forked interpreters (zygotes) every confined call is started from, and the
  go-ahead that lets the caller write the job's row while the call's process is prepared.
- `warm`: a `warm: true` python tool's own interpreter in that pool (SPEC §12).
- `confine`: Landlock, namespaces and the fence a tool runs inside.
- `supervise`: the tool's pipes, its timeout, its whole process group killed.
- `outcome`: what an exit code and output amount to.
- `server_link`: one upstream MCP server's confined process (or URL) and the SDK's client
  talking to it (SPEC §22).
- `server_pool`: those servers' lifecycle (first use, idle stop, restart after a crash) and
  a call of one of their tools, which `runner.run` hands over.
"""
