"""`recallstack demo`: semantic recall on the embedded default, offline, in the terminal.

It writes one user's conversations (four threads, shipped with the package)
into a LibSQL file with the local model, then shows a few recalls from a new
thread: the hits with their scores, their neighbours, and the exact messages
semantic recall adds to the model's input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from recallstack.core.api.memory import Memory
from recallstack.core.contracts.processor import RequestContext
from recallstack.core.messages import Message

DATA = Path(__file__).with_name("demo_conversation.json")
OPTIONS = {"last_messages": 4, "semantic_recall": {"top_k": 3, "message_range": 1}}


@dataclass(frozen=True)
class Outcome:
    query: str
    expected: str
    hits: list[str]
    """The recalled messages' ids, best first: all of them reach the model."""

    @property
    def found(self) -> bool:
        return self.expected in self.hits

    @property
    def first(self) -> bool:
        return self.hits[:1] == [self.expected]


def summary(outcomes: list[Outcome]) -> str:
    """How many recalls handed the model the message each query is about."""
    found, first = sum(o.found for o in outcomes), sum(o.first for o in outcomes)
    return (
        f"{found} of {len(outcomes)} recalls handed the model the right message, "
        f"{first} of them as the first hit."
    )


def conversation() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


def seed(memory: Memory, data: dict[str, Any], console: Console) -> int:
    """Write the shipped conversations (idempotent: fixed ids, upserts)."""
    resource = data["resource_id"]
    total = sum(len(t["messages"]) for t in data["threads"])
    columns = (
        TextColumn("embedding and saving"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("seed", total=total)
        for thread in data["threads"]:
            memory.create_thread(resource, thread_id=thread["id"], title=thread["title"])
            messages = [Message(thread_id=thread["id"], **m) for m in thread["messages"]]
            for start in range(0, len(messages), 4):
                result = memory.save_messages(messages[start : start + 4])
                if result.not_indexed:
                    raise RuntimeError(f"indexing failed: {result.error}")
                progress.advance(task, len(result.messages))
    today = data["today"]
    memory.create_thread(resource, thread_id=today["id"], title=today["title"])
    return total


def show(memory: Memory, data: dict[str, Any], console: Console) -> list[Outcome]:
    """Run each demo query from the new thread and print what recall does."""
    resource, today = data["resource_id"], data["today"]["id"]
    titles = {t["id"]: t["title"] for t in data["threads"]}
    texts = {m["id"]: m["content"] for t in data["threads"] for m in t["messages"]}
    outcomes = []
    for query in data["queries"]:
        result = memory.recall(today, vector_search_string=query["text"])
        hits = Table("score", "conversation", "message", box=None, pad_edge=False)
        for hit in result.hits:
            title = titles.get(hit.thread_id, hit.thread_id)
            hits.add_row(f"{hit.score:.3f}", title, texts[hit.message_id])
        found = {h.message_id for h in result.hits}
        neighbours = Group(
            *(Text("  ★ " if m.id in found else "    ") + _render(m) for m in result.messages)
        )
        context = RequestContext(today, resource)
        messages = [Message(thread_id=today, role="user", content=query["text"])]
        for processor in memory.processors:
            messages = processor.process_input(messages, context)
        model_input = Group(*(_render(m) for m in messages))
        console.print(
            Panel(
                Group(
                    Text("hits, best first:", style="bold"),
                    hits,
                    Text(""),
                    Text("the hits (★) with their neighbours, by time:", style="bold"),
                    neighbours,
                    Text(""),
                    Text("what semantic recall hands to the model:", style="bold"),
                    model_input,
                ),
                title=f"[bold cyan]{query['text']}",
                title_align="left",
            )
        )
        outcomes.append(
            Outcome(query["text"], query["expect"], [h.message_id for h in result.hits])
        )
    return outcomes


def _render(message: Message) -> Text:
    label = f"{message.role}{' (memory)' if message.source == 'memory' else ''}: "
    style = "dim" if message.role == "system" else ""
    return Text(label, style="bold") + Text(message.text, style=style)


def run(memory: Memory, console: Console) -> list[Outcome]:
    data = conversation()
    count = seed(memory, data, console)
    console.print(
        f"[green]saved and indexed {count} messages of {len(data['threads'])} conversations "
        f"for user [bold]{data['resource_id']}[/bold][/green]\n"
    )
    return show(memory, data, console)
