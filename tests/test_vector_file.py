"""LibSQL's vector file: a new store answers from it, and its answers stay the
database's when the file is stale, corrupt, of a deleted index or of another
database."""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recallstack.adapters.libsql import vector as vector_module
from recallstack.adapters.libsql import vector_file as vector_file_module
from recallstack.adapters.libsql.vector import PERSIST_FROM, LibSQLVectorStore
from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.vectors import EVERYWHERE, Partition, Reach

DIM = 8
N = PERSIST_FROM + 200
PARTITIONS: list[Reach] = [EVERYWHERE, Partition("r1"), Partition("r2", "t4")]


def upsert(store: VectorStore, ids: list[str], vectors: Any, partitions: list[Partition]) -> None:
    """Each row in its partition, as Memory writes them: one upsert per partition."""
    for partition in dict.fromkeys(partitions):
        rows = [n for n, p in enumerate(partitions) if p == partition]
        store.upsert("v", [ids[n] for n in rows], vectors[rows], partition=partition)


class Both:
    """The same writes to a LibSQL file and to the reference store."""

    def __init__(self, path: Path) -> None:
        self.url = f"libsql:///{path}"
        self.writer = LibSQLVectorStore(self.url)
        self.reference = InMemoryVectorStore()
        self.rng = np.random.default_rng(11)
        for store in self.stores:
            store.create_index("v", DIM)

    @property
    def stores(self) -> list[VectorStore]:
        return [self.writer, self.reference]

    def upsert(self, numbers: range, resources: int = 4) -> None:
        ids = [f"m{n:05d}" for n in numbers]
        vectors = self.rng.normal(size=(len(ids), DIM)).astype(np.float32)
        partitions = [Partition(f"r{n % resources}", f"t{n % 10}") for n in numbers]
        for store in self.stores:
            upsert(store, ids, vectors, partitions)

    def agree(self, reader: LibSQLVectorStore) -> None:
        """`reader` answers as the reference does, for the whole index and partitions."""
        for seed in range(3):
            probe = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
            for partition in PARTITIONS:
                ours = reader.query("v", probe, top_k=N + 500, partition=partition)
                theirs = self.reference.query("v", probe, top_k=N + 500, partition=partition)
                assert [h.id for h in ours] == [h.id for h in theirs], partition
                assert np.allclose([h.score for h in ours], [h.score for h in theirs], atol=1e-5)

    def fresh(self) -> LibSQLVectorStore:
        """A new store of the file: a new process, as far as the cache is concerned."""
        return LibSQLVectorStore(self.url)


def mapped(store: LibSQLVectorStore) -> bool:
    (snapshot,) = store._snapshots.values()
    return isinstance(snapshot.rows.matrix, np.memmap)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables loaded from SQL rows, by any store, from here on (the real load runs)."""
    seen: list[str] = []
    load = LibSQLVectorStore._load

    def counted(self: LibSQLVectorStore, entry: Any) -> Any:
        seen.append(entry.table)
        return load(self, entry)

    monkeypatch.setattr(LibSQLVectorStore, "_load", counted)
    return seen


@pytest.fixture
def both(tmp_path: Path) -> Both:
    both = Both(tmp_path / "v.db")
    both.upsert(range(N))
    both.agree(both.writer)  # the first query loads from SQL and writes the file
    return both


def vector_file(tmp_path: Path) -> Path:
    (path,) = (tmp_path / "v.db-vectors").glob("*.rsv")
    return path


def test_a_new_store_answers_from_the_file(both: Both, tmp_path: Path, loads: list[str]) -> None:
    assert vector_file(tmp_path).stat().st_size > N * DIM * 4
    reader = both.fresh()
    both.agree(reader)
    assert mapped(reader)
    assert loads == []


def test_the_file_keeps_each_resource_in_one_block(both: Both, tmp_path: Path) -> None:
    """Rows lie by resource, then thread: a resource (and a thread of one resource) is
    a range of positions; a thread whose rows lie under several resources is listed."""
    header, arrays = vector_file_module.read(vector_file(tmp_path))  # type: ignore[misc]
    blocks = header["blocks"]
    assert sorted(blocks["resource_id"]) == ["r0", "r1", "r2", "r3"]
    ends = sorted(tuple(b) for b in blocks["resource_id"].values())
    assert ends[0][0] == 0 and ends[-1][1] == N
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ends))
    assert sorted(header["groups"]["thread_id"]) == [f"t{n}" for n in range(10)]
    for resource, (start, end) in blocks["resource_id"].items():
        ids = header["ids"][start:end]
        assert {int(i[1:]) % 4 for i in ids} == {int(resource[1:])}
        rowids = arrays["rowids"][start:end].tolist()
        by_thread = [(int(i[1:]) % 10, r) for i, r in zip(ids, rowids, strict=True)]
        assert by_thread == sorted(by_thread)  # by thread, then rowid, within a resource
    positions = np.asarray(arrays["by_rowid"])
    assert (np.asarray(arrays["rowids"])[positions] == np.asarray(arrays["sorted_rowids"])).all()


def test_a_thread_of_one_resource_is_a_block(tmp_path: Path) -> None:
    both = Both(tmp_path / "v.db")
    numbers = range(N)
    ids = [f"m{n:05d}" for n in numbers]
    vectors = both.rng.normal(size=(len(ids), DIM)).astype(np.float32)
    partitions = [Partition(f"r{n % 3}", f"t{n % 6}") for n in numbers]
    for store in both.stores:
        upsert(store, ids, vectors, partitions)
    both.agree(both.writer)
    header, _ = vector_file_module.read(vector_file(tmp_path))  # type: ignore[misc]
    assert sorted(header["blocks"]["thread_id"]) == [f"t{n}" for n in range(6)]
    assert header["groups"]["thread_id"] == {}
    reader = both.fresh()
    for partition in (Partition("r1"), Partition("r1", "t4"), Partition("r2", "t5")):
        probe = both.rng.normal(size=DIM).astype(np.float32)
        ours = reader.query("v", probe, top_k=N, partition=partition)
        theirs = both.reference.query("v", probe, top_k=N, partition=partition)
        assert [h.id for h in ours] == [h.id for h in theirs]
        assert ours and all(partition.holds(h.metadata) for h in ours)


def test_rows_written_after_the_file_are_folded_in(both: Both, tmp_path: Path) -> None:
    both.upsert(range(N, N + 50))  # new rows
    both.upsert(range(0, 40), resources=3)  # changed vectors and scopes
    reader = both.fresh()
    both.agree(reader)
    both.upsert(range(N + 50, N + 60))  # a write after the first query: the map is copied
    both.agree(reader)


def test_a_delete_makes_the_file_stale(both: Both, tmp_path: Path, loads: list[str]) -> None:
    for store in both.stores:
        store.delete("v", ids=[f"m{n:05d}" for n in range(0, 300, 3)], partition=EVERYWHERE)
    reader = both.fresh()
    both.agree(reader)
    assert len(loads) == 1  # reloaded from SQL, and the file written again
    second = both.fresh()
    both.agree(second)
    assert mapped(second)
    assert len(loads) == 1


@pytest.mark.parametrize(
    "damage",
    ["cut", "garbage", "empty", "header", "a list", "no groups", "no blocks", "ids short"],
)
def test_a_damaged_file_is_ignored_and_written_again(
    both: Both, tmp_path: Path, damage: str, loads: list[str]
) -> None:
    path = vector_file(tmp_path)
    data = path.read_bytes()
    broken = {
        "cut": data[: len(data) // 2],
        "garbage": b"\x00" * len(data),
        "empty": b"",
        "header": data[:17] + b"#" + data[18:],
        "a list": vector_file_module.MAGIC + (2).to_bytes(8, "little") + b"[]",
    }.get(damage)
    if broken is None:  # a whole file whose header has another shape
        header, arrays = vector_file_module.read(path)  # type: ignore[misc]
        arrays = {name: np.array(array) for name, array in arrays.items()}
        if damage.startswith("no "):
            del header[damage[3:]]
        else:  # "ids short"
            header["ids"] = header["ids"][:-1]
        vector_file_module.write(path.with_suffix(".tmp"), header, arrays, like=path)
        broken = path.with_suffix(".tmp").read_bytes()
    path.write_bytes(broken)
    reader = both.fresh()
    both.agree(reader)
    assert len(loads) == 1
    again = both.fresh()
    both.agree(again)
    assert mapped(again)
    assert len(loads) == 1


def test_an_index_made_again_never_reads_the_old_file(both: Both, tmp_path: Path) -> None:
    path = vector_file(tmp_path)
    old = path.read_bytes()
    for store in both.stores:
        store.delete_index("v")
        store.create_index("v", DIM)
    assert not path.exists()  # deleted with its index
    both.upsert(range(N, N + 30))
    path.write_bytes(old)  # as a killed process might leave it: same versions, same name
    both.agree(both.fresh())


def test_another_databases_file_is_never_read(both: Both, tmp_path: Path) -> None:
    other = Both(tmp_path / "other.db")
    other.upsert(range(N), resources=7)
    other.agree(other.writer)
    # the other database's file put where this one's belongs, same table name
    shutil.copy(next((tmp_path / "other.db-vectors").glob("*.rsv")), vector_file(tmp_path))
    both.agree(both.fresh())


def test_a_killed_writes_temporary_file_is_removed_by_a_later_write(
    both: Both, tmp_path: Path
) -> None:
    path = vector_file(tmp_path)
    abandoned = path.with_name(f"{path.name}.killed.part")
    running = path.with_name(f"{path.name}.running.part")
    for part in (abandoned, running):
        part.write_bytes(b"half a file")
    an_hour_ago = time.time() - 3600
    os.utime(abandoned, (an_hour_ago, an_hour_ago))
    for store in both.stores:
        store.delete(
            "v", ids=["m00000"], partition=EVERYWHERE
        )  # the next load writes the file again
    both.agree(both.fresh())
    assert not abandoned.exists()
    assert running.exists()  # may be another process's write in progress


def test_four_threads_query_while_the_file_is_written_and_rows_arrive(
    both: Both, tmp_path: Path
) -> None:
    shutil.rmtree(tmp_path / "v.db-vectors")  # the next load writes it, under these threads
    reader = both.fresh()
    errors: list[BaseException] = []

    def query(seed: int) -> None:
        try:
            probe = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
            for n in range(20):
                hits = reader.query("v", probe, top_k=50, partition=Partition(f"r{n % 4}"))
                assert all(h.metadata["resource_id"] == f"r{n % 4}" for h in hits)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=query, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for lo in range(N, N + 400, 50):
        both.upsert(range(lo, lo + 50))
    for thread in threads:
        thread.join()
    assert not errors, errors
    both.agree(reader)
    both.agree(both.fresh())


def test_rows_written_during_a_load_are_all_found(
    both: Both, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load from SQL reads in pages: rows written between pages, more than it counted
    at the start, are read or folded in, none lost."""
    monkeypatch.setattr(vector_module, "LOAD_PAGE", 100)
    shutil.rmtree(tmp_path / "v.db-vectors")
    reader = both.fresh()
    read = reader.db.query
    written: list[int] = []

    def query(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        rows = read(sql, params)
        if "LIMIT 100" in sql and not written:  # after the first page
            written.append(1)
            both.upsert(range(N, N + 2_000))
        return rows

    monkeypatch.setattr(reader.db, "query", query)
    both.agree(reader)
    assert written
