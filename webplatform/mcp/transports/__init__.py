"""How MCP sessions reach the bridge.

- `stdio`: `aat mcp` in process; `local`: the same session over `aat serve`'s local socket.
- `http`: streamable HTTP at `/mcp`, with agent tokens.
- `oauth`: `/mcp` as an OAuth protected resource, and aat's authorization-server routes.
- `relay`, `relay_messages`, `upstream`: `aat mcp --url`, standard library only.
- `handoff`: `aat mcp` handing its session to a running `aat serve`.
"""
