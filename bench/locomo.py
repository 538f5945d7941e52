"""Retrieval quality on LoCoMo, through the public API: recall@k of evidence turns.

    python bench/locomo.py ../shared/data/locomo/locomo-dev.json [--backend URL ...]
        [--embedder SPEC] [--conversations N]

The protocol is the paper's Table 3 (Maharana et al., "Evaluating Very
Long-Term Conversational Memory of LLM Agents", ACL 2024), retrieval alone:

- every dialogue turn is one entry: a message "Speaker: text", plus
  " [shares a photo: caption]" when the turn carries a photo caption;
- each conversation is one resource, each session one thread, its messages
  dated from the session's date (one second apart, in order);
- each question of categories 1-4 (multi-hop, temporal, open-domain,
  single-hop; 5, adversarial, has no evidence to find) is asked with
  `Memory.search(conversation, question, top_k=50)`;
- recall@k is the fraction of the question's evidence turns among the top k
  hits (a question without evidence counts as 1), averaged over questions.

The data stays where it is (its licence is non-commercial); nothing of it is
copied into the repository. Prints R@5/10/25/50 overall and per category for
each backend (`--backend` names a URL used as storage and vector store;
default: a LibSQL file in a temporary folder), with the ingest rate and the
search latency p50/p95 (embedding included).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from recallstack import Memory, Message

KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
PAPER = {"DRAGON (paper, all ten conversations)": (56.7, 66.2, 76.7, 82.7)}


def session_start(text: str) -> datetime:
    """`1:56 pm on 8 May, 2023` → a UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def sessions(conversation: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    """(number, start, turns) of every session that has turns, in order."""
    found = []
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and turns:
            number = int(match.group(1))
            found.append((number, session_start(conversation[f"{key}_date_time"]), turns))
    return sorted(found, key=lambda s: s[0])


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def role(turn: dict[str, Any], conversation: dict[str, Any]) -> str:
    """The first speaker is the user, the other the assistant."""
    return "user" if turn["speaker"] == conversation["speaker_a"] else "assistant"


def ingest(memory: Memory, sample: dict[str, Any]) -> int:
    resource = sample["sample_id"]
    conversation = sample["conversation"]
    count = 0
    for number, start, turns in sessions(conversation):
        thread = f"{resource}-session-{number}"
        memory.create_thread(resource, thread_id=thread, title=f"Session {number}")
        messages = [
            Message(
                id=f"{resource}:{turn['dia_id']}",
                thread_id=thread,
                role=role(turn, conversation),
                content=turn_text(turn),
                created_at=start + timedelta(seconds=k),
            )
            for k, turn in enumerate(turns)
        ]
        result = memory.save_messages(messages)
        if result.not_indexed:
            raise RuntimeError(f"{resource}: indexing failed: {result.error}")
        count += len(messages)
    return count


def evidence(qa: dict[str, Any]) -> set[str]:
    """The evidence turn ids; a few entries hold two ids separated by `;`."""
    return {part.strip() for item in qa.get("evidence", []) for part in item.split(";") if part}


def run(url: str, embedder: str, hybrid: Any, data: list[dict[str, Any]]) -> dict[str, Any]:
    recall: dict[int, list[list[float]]] = defaultdict(list)
    latencies: list[float] = []
    options = {"semantic_recall": {"top_k": max(KS), "hybrid": hybrid}}
    with Memory(url, url, embedder, options) as memory:
        start = time.perf_counter()
        turns = sum(ingest(memory, sample) for sample in data)
        ingest_rate = turns / (time.perf_counter() - start)
        for sample in data:
            resource = sample["sample_id"]
            for qa in sample["qa"]:
                if qa["category"] not in CATEGORIES:
                    continue
                began = time.perf_counter()
                hits = memory.search(resource, qa["question"], top_k=max(KS))
                latencies.append((time.perf_counter() - began) * 1000)
                ranked = [h.message.id.split(":", 1)[1] for h in hits]
                wanted = evidence(qa)
                recall[qa["category"]].append(
                    [len(wanted & set(ranked[:k])) / len(wanted) if wanted else 1.0 for k in KS]
                )
    return {
        "turns": turns,
        "ingest": ingest_rate,
        "p50": statistics.median(latencies),
        "p95": statistics.quantiles(latencies, n=20)[-1],
        "recall": recall,
    }


def mean(rows: list[list[float]]) -> list[float]:
    return [100 * sum(r[i] for r in rows) / len(rows) for i in range(len(KS))]


def report(name: str, result: dict[str, Any]) -> None:
    every = [row for rows in result["recall"].values() for row in rows]
    print(
        f"\n{name}: {result['turns']} turns, ingest {result['ingest']:.0f} turns/s, "
        f"search p50 {result['p50']:.1f} ms, p95 {result['p95']:.1f} ms (embedding included)"
    )
    print(f"| questions | n | {' | '.join(f'R@{k}' for k in KS)} |")
    print("|---|---|" + "---|" * len(KS))
    print(f"| all (1-4) | {len(every)} | {' | '.join(f'{v:.1f}' for v in mean(every))} |")
    for category, label in CATEGORIES.items():
        rows = result["recall"].get(category, [])
        if rows:
            cells = " | ".join(f"{v:.1f}" for v in mean(rows))
            print(f"| {category} {label} | {len(rows)} | {cells} |")
    for anchor, figures in PAPER.items():
        print(f"| {anchor} | | {' | '.join(f'{v:.1f}' for v in figures)} |")


def arguments(doc: str) -> argparse.ArgumentParser:
    """A parser with what every LoCoMo bench takes: the file and `--conversations`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("path", type=Path, help="a LoCoMo JSON file")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N")
    return parser


def load(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The conversations `arguments` named."""
    data: list[dict[str, Any]] = json.loads(args.path.read_text())
    return data[: args.conversations]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--backend", action="append", help="storage and vector URL (repeatable)")
    parser.add_argument("--embedder", default="local/all-MiniLM-L6-v2")
    parser.add_argument(
        "--hybrid",
        nargs="?",
        const="{}",
        default=None,
        help="hybrid recall, with options as JSON (e.g. '{\"weight\": 0.5}')",
    )
    args = parser.parse_args()
    data = load(args)
    with tempfile.TemporaryDirectory() as tmp:
        hybrid = json.loads(args.hybrid) if args.hybrid is not None else False
        for url in args.backend or [f"libsql:///{Path(tmp) / 'locomo.db'}"]:
            name = f"{url}, hybrid {hybrid}" if hybrid is not False else url
            report(name, run(url, args.embedder, hybrid, data))


if __name__ == "__main__":
    main()
