"""The shape docs/architecture.md promises, checked: small classes in the core, one engine
that only the two memories reach into, each operation written once, and one async
mechanism."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
CORE = sorted((ROOT / "core").rglob("*.py"))
LARGEST_CLASS = 350
FACADES = {ROOT / "core" / "api" / "memory.py", ROOT / "core" / "api" / "async_memory.py"}
"""The only modules that reach into `Engine` (`_engine`)."""


def everything() -> list[Path]:
    folders = ("core", "adapters", "embedders", "integrations", "conformance", "src", "bench")
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_class_in_the_core_is_longer_than_350_lines(path: Path) -> None:
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > LARGEST_CLASS
    ]
    assert not long


def test_only_the_memories_reach_into_the_engine() -> None:
    reaching = [
        str(p.relative_to(ROOT))
        for p in everything()
        if p not in FACADES and re.search(r"\._engine\b|\._ops\b|\._backends\b", p.read_text())
    ]
    assert not reaching


def test_no_operation_is_written_twice() -> None:
    """Operations are blocking code that `AsyncMemory` awaits on the loop: no `x()` beside
    an `x_steps()` or `ax()` copy, and no module keeps a table of backends by class name."""
    twins = []
    for p in CORE:
        text = p.read_text()
        defined = set(re.findall(r"def (\w+)\(", text))
        copies = {f"{n}_steps" for n in defined} | {f"a{n}" for n in defined if n[0] != "_"}
        allowed = {"aembed", "aembed_tokenized", "aclose"}  # the embedder contract's own
        twins += [f"{p.relative_to(ROOT)}: {n}" for n in (copies & defined) - allowed]
        twins += [f"{p.relative_to(ROOT)}: by name" for _ in re.findall(r'\{"Storage":', text)]
    assert not twins


def test_one_async_mechanism() -> None:
    """Only core/runtime/awaiting.py and the embedding cache ask whether code runs on the
    loop (`in_asyncio`): an adapter reaches its driver through its `Seam`, never by
    branching itself; nothing but the worker-thread side of a store starts a thread for
    the loop (`to_thread`), besides the local model's and the doctor's."""
    asking = [str(p.relative_to(ROOT)) for p in everything() if "in_asyncio(" in p.read_text()]
    assert sorted(asking) == ["core/runtime/awaiting.py", "core/runtime/embedding_cache.py"]
    threads = [str(p.relative_to(ROOT)) for p in everything() if "to_thread(" in p.read_text()]
    assert sorted(threads) == [
        "core/api/async_memory.py",  # doctor: a one-off walk, blocking
        "core/contracts/embedder.py",  # aembed's default: a model computing on the CPU
        "core/runtime/awaiting.py",  # InWorkerThread
        "embedders/local.py",
    ]
    assert not (ROOT / "core/runtime/calls.py").exists()


def test_the_sql_storages_write_the_shared_sql_once() -> None:
    """LibSQL and Postgres keep only what is their own: what `SqlStorage` writes for both
    (resources, threads, reading messages, the index ledger) is not written again."""
    from recallstack.adapters.libsql.storage import LibSQLStorage
    from recallstack.adapters.pg.storage import PgStorage
    from recallstack.adapters.sql_storage import SqlStorage

    hooks = {"_wrote"}  # what a subclass may say after a write: no SQL
    shared = {n for n, v in vars(SqlStorage).items() if callable(v) and n[0] == "_"} - hooks
    assert {"_get_thread", "_list_messages", "_mark_indexed"} <= shared
    again = [f"{c.__name__}.{n}" for c in (LibSQLStorage, PgStorage) for n in shared & set(vars(c))]
    assert not again


def test_no_vector_store_adapter_names_the_partition_keys() -> None:
    """The tenant scope is the contract's `partition`, not a filter an adapter decodes: no
    adapter's vector store names `resource_id` or `thread_id` (storages keep them as
    columns), and the recall path never reaches `EVERYWHERE`."""
    keys = {"resource_id", "thread_id"}
    named = [
        f"{p.relative_to(ROOT)}:{node.lineno}"
        for p in sorted((ROOT / "adapters").rglob("*.py"))
        if not p.name.endswith("storage.py") and p.name != "word_index.py"
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Constant) and node.value in keys
    ]
    assert not named
    recall_path = [
        *sorted((ROOT / "core" / "recall").glob("*.py")),
        ROOT / "core/api/operations.py",
    ]
    assert not [str(p.relative_to(ROOT)) for p in recall_path if "EVERYWHERE" in p.read_text()]
