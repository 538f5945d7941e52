"""recallstack over HTTP: a versioned JSON API (`app.py`) for agents in any language, and an
MCP server (`mcp_server.py`) for assistants, each API key bound to one resource (`keys.py`).
Run them with `recallstack serve` and `recallstack mcp` (docs/server.md)."""
