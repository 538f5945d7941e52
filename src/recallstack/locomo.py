"""LoCoMo, retrieval alone: recall@k of a question's evidence turns, through the public API
(`recallstack eval locomo`; `bench/locomo.py` wraps it).

The protocol is the paper's Table 3 (Maharana et al., "Evaluating Very
Long-Term Conversational Memory of LLM Agents", ACL 2024):

- every dialogue turn is one entry: a message "Speaker: text", plus
  " [shares a photo: caption]" when the turn carries a photo caption;
- each conversation is one resource, each session one thread, its messages
  dated from the session's date (one second apart, in order);
- each question of categories 1-4 (multi-hop, temporal, open-domain,
  single-hop; 5, adversarial, has no evidence to find) is asked with
  `Memory.search(conversation, question, top_k=50)`, under the memory's own
  options (what `semantic_recall: True` gives, unless told otherwise);
- recall@k is the fraction of the question's evidence turns among the top k
  hits (a question without evidence counts as 1), averaged over questions.
  Recall-any@k counts a question found when one of its evidence turns is in
  the top k, recall-all@k when all of them are.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from recallstack.core.api.memory import Memory
from recallstack.core.errors import InvalidInputError
from recallstack.core.messages import Message

KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DRAGON = (56.7, 66.2, 76.7, 82.7)
"""The paper's best retriever (DRAGON, 110M parameters) over all ten conversations."""

Progress = Callable[[str, int, int], None]
"""`progress(stage, done, total)`: stage is "saving turns" or "asking questions"."""


def load(path: str | Path) -> list[dict[str, Any]]:
    """The conversations of a LoCoMo file, each checked for what the benchmark reads: an
    error names the conversation and the field."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"{str(path)!r} is not a LoCoMo JSON file: {exc}") from None
    if not isinstance(data, list) or not data:
        raise InvalidInputError(f"{str(path)!r}: expected a JSON list of conversations")
    for n, sample in enumerate(data):
        where = f"{str(path)!r}, conversation {n}"
        if not isinstance(sample, dict) or not isinstance(sample.get("sample_id"), str):
            raise InvalidInputError(f"{where}: no sample_id")
        conversation, qa = sample.get("conversation"), sample.get("qa")
        if not isinstance(conversation, dict) or "speaker_a" not in conversation:
            raise InvalidInputError(f"{where}: no conversation with speaker_a")
        if not isinstance(qa, list):
            raise InvalidInputError(f"{where}: no qa list")
        try:  # read everything the run reads
            [(turn_text(t), t["dia_id"]) for _, _, s in sessions(conversation) for t in s]
            [(q["question"], q["category"], evidence(q)) for q in qa]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInputError(
                f"{where} ({sample['sample_id']}): bad or missing {exc}"
            ) from None
    return data


def sessions(conversation: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    """(number, start, turns) of every session that has turns, in order."""
    found = []
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and turns:
            start = conversation[f"{key}_date_time"].strip()
            at = datetime.strptime(start, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            found.append((int(match.group(1)), at, turns))
    return sorted(found, key=lambda s: s[0])


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def evidence(qa: dict[str, Any]) -> set[str]:
    """The evidence turn ids; a few entries hold two ids separated by `;`."""
    return {part.strip() for item in qa.get("evidence", []) for part in item.split(";") if part}


def threads_of(sample: dict[str, Any]) -> list[str]:
    """The thread ids a conversation is written to: one per session."""
    return [f"{sample['sample_id']}-session-{n}" for n, _, _ in sessions(sample["conversation"])]


def messages_of(sample: dict[str, Any]) -> Iterator[tuple[str, list[Message]]]:
    """Each session's thread id and its turns as messages."""
    resource, conversation = sample["sample_id"], sample["conversation"]
    for (_, start, turns), thread in zip(sessions(conversation), threads_of(sample), strict=True):
        yield (
            thread,
            [
                Message(
                    id=f"{resource}:{turn['dia_id']}",
                    thread_id=thread,
                    role="user" if turn["speaker"] == conversation["speaker_a"] else "assistant",
                    content=turn_text(turn),
                    created_at=start + timedelta(seconds=k),
                )
                for k, turn in enumerate(turns)
            ],
        )


@dataclass
class Scored:
    """One question's outcome at each k."""

    category: int
    recall: list[float]
    any: list[bool]
    all: list[bool]


@dataclass
class Evaluation:
    """What a run measured."""

    turns: int = 0
    ingest_seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    questions: list[Scored] = field(default_factory=list)

    def rows(self, category: int | None = None) -> dict[str, list[float]]:
        """R@k, recall-any@k and recall-all@k in percent, over one category or all."""
        chosen = [q for q in self.questions if category in (None, q.category)]
        n = max(len(chosen), 1)
        return {
            "recall": [100 * sum(q.recall[i] for q in chosen) / n for i in range(len(KS))],
            "any": [100 * sum(q.any[i] for q in chosen) / n for i in range(len(KS))],
            "all": [100 * sum(q.all[i] for q in chosen) / n for i in range(len(KS))],
        }

    def summary(self) -> dict[str, Any]:
        """Everything, as JSON for `--json`."""
        latencies = sorted(self.latencies_ms)
        return {
            "turns": self.turns,
            "questions": len(self.questions),
            "ingest_turns_per_second": self.turns / self.ingest_seconds
            if self.ingest_seconds
            else None,
            "search_ms": {
                "p50": statistics.median(latencies) if latencies else None,
                "p95": latencies[int(0.95 * (len(latencies) - 1))] if latencies else None,
            },
            "k": list(KS),
            "all": self.rows(),
            "by_category": {
                CATEGORIES[c]: {
                    "questions": sum(q.category == c for q in self.questions),
                    **self.rows(c),
                }
                for c in CATEGORIES
            },
            "dragon": list(DRAGON),
        }


def refuse_taken(memory: Memory, data: list[dict[str, Any]]) -> None:
    """Refuse a store that already holds a thread the benchmark would write, before
    anything is written: its messages would be replaced."""
    for sample in data:
        for thread in threads_of(sample):
            if memory.get_thread(thread) is not None:
                raise InvalidInputError(
                    f"the store already holds thread {thread!r}: evaluate on an empty store "
                    "(or delete the benchmark's threads)"
                )


def evaluate(
    memory: Memory, data: list[dict[str, Any]], progress: Progress | None = None
) -> Evaluation:
    """Write the conversations, then ask every question of categories 1-4; the caller
    deletes the threads (`threads_of`) when it is done with them."""
    result = Evaluation()
    total = sum(len(turns) for s in data for _, _, turns in sessions(s["conversation"]))
    started = time.perf_counter()
    for sample in data:
        for thread, messages in messages_of(sample):
            memory.create_thread(sample["sample_id"], thread_id=thread)
            saved = memory.save_messages(messages)
            if saved.not_indexed:
                raise InvalidInputError(f"{thread}: indexing failed: {saved.error}")
            result.turns += len(messages)
            if progress is not None:
                progress("saving turns", result.turns, total)
    result.ingest_seconds = time.perf_counter() - started
    asked = [(s["sample_id"], q) for s in data for q in s["qa"] if q["category"] in CATEGORIES]
    for done, (resource, qa) in enumerate(asked, 1):
        began = time.perf_counter()
        hits = memory.search(resource, qa["question"], top_k=max(KS))
        result.latencies_ms.append((time.perf_counter() - began) * 1000)
        ranked = [h.message.id.split(":", 1)[1] for h in hits]
        wanted = evidence(qa)
        found = [wanted & set(ranked[:k]) for k in KS]
        result.questions.append(
            Scored(
                qa["category"],
                recall=[len(f) / len(wanted) if wanted else 1.0 for f in found],
                any=[bool(f) or not wanted for f in found],
                all=[f == wanted for f in found],
            )
        )
        if progress is not None:
            progress("asking questions", done, len(asked))
    return result
