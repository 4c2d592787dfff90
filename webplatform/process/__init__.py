"""A tool call as an operating-system process.

- `runner`: the one subprocess runner: a call in, a `RunResult` out.
- `launch`: the argv (never a shell) and the whole environment a tool starts with.
- `warm`: the pre-forked interpreters every confined call is started from.
- `confine`: Landlock, namespaces and the fence a tool runs inside.
- `supervise`: the tool's pipes, its timeout, its whole process group killed.
- `outcome`: what an exit code and output amount to.
"""
