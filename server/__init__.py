"""recallstack over HTTP: a versioned JSON API (`app.py`) for agents in any language, each
API key bound to one resource (`keys.py`). Run it with `recallstack serve` (docs/server.md)."""
