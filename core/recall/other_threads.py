"""The one system message that carries messages recalled from other threads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import groupby

from recallstack.core.messages import Message
from recallstack.core.records import Thread

HEADER = "The following messages were remembered from other conversations:"
OPEN, CLOSE = "<remembered_from_other_conversation>", "<end_remembered_from_other_conversation>"


def render(messages: Sequence[Message], threads: Mapping[str, Thread]) -> str:
    """Messages grouped by thread, then by UTC date; ordered by (created_at, thread, id).

    Each thread appears once, in the order of its earliest message.
    Deterministic and timezone-independent: every time shown is UTC.
    """
    by_thread: dict[str, list[Message]] = {}
    for m in sorted(messages, key=lambda m: (m.created_at, m.thread_id, m.id)):
        by_thread.setdefault(m.thread_id, []).append(m)
    lines = [HEADER, OPEN]
    for thread_id, in_thread in by_thread.items():
        thread = threads.get(thread_id)
        title = thread.title if thread is not None and thread.title else thread_id
        for day, on_day in groupby(in_thread, key=lambda m: m.created_at.date()):
            lines.append(f'Conversation "{title}", {day.isoformat()}:')
            for m in on_day:
                text = " ".join(m.text.splitlines())
                lines.append(f"[{m.created_at:%H:%M} UTC] {m.role.capitalize()}: {text}")
    lines.append(CLOSE)
    return "\n".join(lines)
