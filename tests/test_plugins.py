"""Plugins: discovery through entry points, resolution, disabling, missing extras."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from recallstack.adapters.memory.vector import InMemoryVectorStore
from recallstack.core.errors import (
    BackendError,
    InvalidInputError,
    MissingDependencyError,
    UnknownBackendError,
)
from recallstack.core.runtime import hookspecs
from recallstack.core.runtime.registry import build_registry, plugin_manager, registry


def test_builtins_come_through_entry_points() -> None:
    pm = plugin_manager()
    assert "memory" in dict(pm.list_name_plugin())
    registry = build_registry(pm)
    assert registry.find("vector", "memory://").plugin == "memory"
    assert isinstance(registry.vector_store("memory://"), InMemoryVectorStore)
    assert registry.storage("memory://").backend == "memory"
    assert registry.find("storage", "memory").name == "memory"


def test_third_party_plugin_is_found(example_plugin: Path) -> None:
    registry = build_registry(plugin_manager())
    backend = registry.find("vector", "example://anything")
    assert (backend.name, backend.plugin) == ("example", "example")
    store = registry.vector_store("example://")
    store.create_index("i", 2)
    assert store.list_indexes() == ["i"]
    targets = {(t.backend, t.kind, t.plugin) for t in registry.targets}
    assert {("example", "vector", "example"), ("memory", "vector", "memory")} <= targets


def test_third_party_storage_and_embedder(example_plugin: Path) -> None:
    from recallstack.core.api.memory import Memory
    from recallstack.core.messages import Message

    registry = build_registry(plugin_manager())
    assert registry.find("storage", "example://").plugin == "example"
    assert registry.find("embedder", "example/lengths").plugin == "example"
    storage = registry.storage("example://")
    embedder = registry.embedder("example/lengths")
    with Memory(storage, "memory://", embedder, {"semantic_recall": True}) as memory:
        memory.create_thread("ada", thread_id="t")
        saved = memory.save_messages([Message(thread_id="t", role="user", content="hello")])
        assert saved.not_indexed == []
        assert memory.recall("t", vector_search_string="hello").hits


def test_a_factory_of_the_wrong_kind_is_named(example_plugin: Path) -> None:
    registry = build_registry(plugin_manager())
    with pytest.raises(
        BackendError, match="plugin 'example': storage backend 'example-wrong' made a str"
    ):
        registry.storage("wrong://")


def test_missing_driver_names_the_extra(example_plugin: Path) -> None:
    registry = build_registry(plugin_manager())
    with pytest.raises(MissingDependencyError) as err:
        registry.vector_store("example+remote://host")
    assert 'pip install "recallstack[example-remote]"' in str(err.value)


def test_plugins_can_be_disabled(example_plugin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = build_registry(plugin_manager(disabled=["example"]))
    with pytest.raises(UnknownBackendError, match="no vector backend answers 'example://'"):
        registry.find("vector", "example://")
    everything = [name for name, _ in plugin_manager().list_name_plugin()]
    assert {"memory", "example"} <= set(everything)
    monkeypatch.setenv("RECALLSTACK_DISABLE_PLUGINS", " , ".join(everything))
    assert list(build_registry(plugin_manager()).all()) == []


def test_unknown_scheme_lists_known_ones() -> None:
    registry = build_registry(plugin_manager())
    with pytest.raises(UnknownBackendError, match=r"known: .*\blibsql, memory\b"):
        registry.vector_store("nosuch://x")
    with pytest.raises(InvalidInputError):
        registry.vector_store("")


def test_duplicate_names_are_refused(example_plugin: Path) -> None:
    import recallstack_example

    pm = plugin_manager()
    pm.register(SimpleNamespace(register_vector_stores=recallstack_example.register_vector_stores))
    with pytest.raises(InvalidInputError, match="already registered"):
        build_registry(pm)


def test_every_hook_is_documented() -> None:
    hooks = [name for name in dir(hookspecs) if name.startswith("register_")]
    assert hooks
    for name in hooks:
        doc = getattr(hookspecs, name).__doc__ or ""
        assert "register(" in doc, f"hook {name} has no usage documentation"


def test_cli_lists_backends_including_third_party(example_plugin: Path) -> None:
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-m", "recallstack", "backends", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    listed = {(b["kind"], b["name"]): b for b in json.loads(out)}
    assert listed["vector", "memory"]["schemes"] == ["memory"]
    assert "$exists" in listed["vector", "memory"]["capabilities"]["operators"]
    assert listed["storage", "memory"]["installed"] is True
    assert listed["vector", "example"]["plugin"] == "example"
    assert listed["vector", "example-remote"]["installed"] is False
    assert (
        listed["vector", "example-remote"]["install"] == 'pip install "recallstack[example-remote]"'
    )
    table = subprocess.run(
        [sys.executable, "-m", "recallstack", "backends"],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "300"},
    ).stdout
    assert "example-remote" in table


def test_import_needs_no_backend_library() -> None:
    code = (
        "import sys, recallstack, recallstack.adapters.memory;"
        "recallstack.registry();"
        "bad = {'libsql', 'psycopg', 'pymongo', 'qdrant_client', 'chromadb', 'pinecone',"
        " 'torch', 'sentence_transformers', 'httpx'} & set(sys.modules);"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


SECRET = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("kind", "url"),
    [
        # no server answers (pymongo would wait 30 s to find none)
        ("storage", f"mongodb://ada:{SECRET}@127.0.0.1:1/app?serverSelectionTimeoutMS=300"),
        ("vector", f"qdrant+edge://ada:{SECRET}@host/x"),
        ("vector", f"chroma+grpc://host:1?token={SECRET}"),
        ("storage", f"libsql://my-db.turso.io?authToken={SECRET}"),  # no replica given
        ("vector", f"postgresql://ada:{SECRET}@127.0.0.1:1/db?connect_timeout=1"),
    ],
)
def test_a_secret_never_reaches_an_error_a_log_or_the_cli(
    kind: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from click.testing import CliRunner

    from recallstack.cli import main
    from recallstack.core.errors import RecallstackError

    with caplog.at_level("DEBUG"), pytest.raises(RecallstackError) as raised:
        registry().create(kind, url)
    assert SECRET not in str(raised.value) and SECRET not in repr(raised.value)
    assert SECRET not in caplog.text
    option = "--storage" if kind == "storage" else "--vector"
    args = ["threads", option, url, "--embedder", "hash/8", "--resource", "r"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (1, 2) and SECRET not in result.output


def test_redact_hides_passwords_and_secret_parameters() -> None:
    from recallstack.core.urls import redact

    assert redact("postgresql://ada:pw@h:5/db?sslmode=require&password=x") == (
        "postgresql://ada:***@h:5/db?sslmode=require&password=***"
    )
    assert (
        redact("qdrant+https://[::1]:6333/?api_key=k") == "qdrant+https://[::1]:6333/?api_key=***"
    )
    assert redact("libsql:///local.db") == "libsql:///local.db"
