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
from recallstack.core import hookspecs
from recallstack.core.errors import InvalidInputError, MissingDependencyError, UnknownBackendError
from recallstack.core.registry import build_registry, plugin_manager


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
