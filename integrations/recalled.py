"""How the integrations show a model what the memory recalled: one note, a line per
message, oldest first, each dated and attributed."""

from __future__ import annotations

from collections.abc import Sequence

from recallstack.core.messages import Message

NOTE = "Recalled from this user's earlier conversations:"
"""How a note begins; integrations use it to tell their own notes from the conversation."""


def note(messages: Sequence[Message]) -> str | None:
    """The note for what was recalled, or None when nothing with text was."""
    lines = [line(m) for m in messages if m.text.strip()]
    return "\n".join([NOTE, *lines]) if lines else None


def line(message: Message) -> str:
    return f"[{message.created_at:%Y-%m-%d}] {message.role}: {message.text}"
