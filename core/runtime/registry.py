"""The registry: plugins found through entry points, and URL → backend resolution."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar, overload

import pluggy

from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.contracts.embedder import Embedder
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import (
    BackendError,
    InvalidInputError,
    MissingDependencyError,
    UnknownBackendError,
)
from recallstack.core.runtime import hookspecs
from recallstack.core.urls import redact

Kind = Literal["vector", "storage", "embedder"]
ENTRY_POINT_GROUP = "recallstack"
DISABLE_ENV = "RECALLSTACK_DISABLE_PLUGINS"


Made = TypeVar("Made", VectorStore, Storage, Embedder)
"""What a backend's factory makes: a vector store, a storage or an embedder."""
MAKES: dict[Kind, type[Any]] = {"vector": VectorStore, "storage": Storage, "embedder": Embedder}


@dataclass(frozen=True)
class Backend(Generic[Made]):
    """One backend a plugin offers: its name, URL schemes, factory and capabilities."""

    kind: Kind
    name: str
    schemes: tuple[str, ...]
    factory: Callable[..., Made]
    """Called with the URL (or `provider/model` string) and keyword options."""
    capabilities: Capabilities | None = None
    extra: str | None = None
    """The `recallstack[...]` extra that installs the driver."""
    requires: tuple[str, ...] = ()
    """Modules that must be importable; checked before the factory runs."""
    description: str = ""
    plugin: str = ""
    """Filled in by the registry: the name of the plugin that registered it."""

    def missing_module(self) -> str | None:
        for module in self.requires:
            if importlib.util.find_spec(module) is None:
                return module
        return None


@dataclass(frozen=True)
class ConformanceTarget:
    """How the conformance suite gets a throwaway instance of a backend."""

    backend: str
    kind: Literal["vector", "storage"]
    start: Callable[[], AbstractContextManager[str]]
    """Yields a URL for a fresh, empty instance; cleans up on exit."""
    mode: str = "default"
    """Which way of running the backend this is (in process, server, ...)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Keyword options for the backend's factory in this mode."""
    stand_in: str | None = None
    """Set when the instance is a stand-in, not the real engine."""
    asyncio_driver: bool = False
    """Set when the store made in this mode awaits an asyncio driver under `AsyncMemory`
    (its `asyncio_driver`): the suite then runs its storage- and vector-level cases
    awaited as well."""
    plugin: str = ""


@dataclass
class Registry:
    """Every backend that the enabled plugins registered, by kind."""

    backends: dict[Kind, dict[str, Backend[Any]]] = field(
        default_factory=lambda: {"vector": {}, "storage": {}, "embedder": {}}
    )
    targets: list[ConformanceTarget] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)

    def all(self) -> Iterator[Backend[Any]]:
        for table in self.backends.values():
            yield from table.values()

    def find(self, kind: Kind, spec: str) -> Backend[Any]:
        """The backend of this kind answering a URL, a `provider/model` or a name."""
        if not isinstance(spec, str) or not spec:
            raise InvalidInputError(f"a {kind} backend is chosen by a non-empty string")
        table = self.backends[kind]
        if spec in table:
            return table[spec]
        separator = "/" if kind == "embedder" else ":"
        scheme = spec.split(separator, 1)[0].lower()
        for backend in table.values():
            if scheme in backend.schemes:
                return backend
        known = sorted(s for b in table.values() for s in b.schemes)
        raise UnknownBackendError(
            f"no {kind} backend answers {redact(spec)!r}; known: {', '.join(known) or 'none'}"
        )

    @overload
    def create(self, kind: Literal["vector"], spec: str, **options: Any) -> VectorStore: ...
    @overload
    def create(self, kind: Literal["storage"], spec: str, **options: Any) -> Storage: ...
    @overload
    def create(self, kind: Literal["embedder"], spec: str, **options: Any) -> Embedder: ...

    def create(self, kind: Kind, spec: str, **options: Any) -> VectorStore | Storage | Embedder:
        """Build the backend answering `spec`; a plugin whose factory makes something
        else than its kind is named in the error."""
        backend = self.find(kind, spec)
        module = backend.missing_module()
        if module is not None:
            raise MissingDependencyError(backend.name, module, backend.extra or backend.name)
        made = backend.factory(spec, **options)
        if not isinstance(made, MAKES[kind]):
            raise BackendError(
                f"plugin {backend.plugin!r}: {kind} backend {backend.name!r} made a "
                f"{type(made).__name__}, not a {MAKES[kind].__name__}"
            )
        return made  # type: ignore[no-any-return]

    def vector_store(self, url: str, **options: Any) -> VectorStore:
        return self.create("vector", url, **options)

    def storage(self, url: str, **options: Any) -> Storage:
        return self.create("storage", url, **options)

    def embedder(self, spec: str, **options: Any) -> Embedder:
        return self.create("embedder", spec, **options)


def plugin_manager(disabled: Iterable[str] = ()) -> pluggy.PluginManager:
    """A plugin manager with every `recallstack` entry point loaded, less the disabled ones.

    Plugins are also disabled by name through the `RECALLSTACK_DISABLE_PLUGINS`
    environment variable (comma-separated).
    """
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    from_env = os.environ.get(DISABLE_ENV, "").split(",")
    for name in {*disabled, *from_env} - {""}:
        pm.set_blocked(name.strip())
    pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    return pm


def build_registry(pm: pluggy.PluginManager) -> Registry:
    """Ask every plugin to register its backends."""
    registry = Registry(plugins=sorted(n for n, p in pm.list_name_plugin() if p is not None))
    for kind, hook in (
        ("vector", pm.hook.register_vector_stores),
        ("storage", pm.hook.register_storages),
        ("embedder", pm.hook.register_embedders),
    ):
        for impl in hook.get_hookimpls():
            impl.function(register=_adder(registry, kind, impl.plugin_name))
    for impl in pm.hook.register_conformance_targets.get_hookimpls():
        impl.function(register=lambda t, p=impl.plugin_name: registry.targets.append(_named(t, p)))
    return registry


def _adder(registry: Registry, kind: str, plugin: str) -> Callable[[Backend[Any]], None]:
    def register(backend: Backend[Any]) -> None:
        if backend.kind != kind:
            raise InvalidInputError(
                f"plugin {plugin!r} registered a {backend.kind} backend from the {kind} hook"
            )
        table = registry.backends[backend.kind]
        if backend.name in table:
            raise InvalidInputError(
                f"plugin {plugin!r} registers {kind} backend {backend.name!r}, "
                f"already registered by {table[backend.name].plugin!r}"
            )
        table[backend.name] = _named(backend, plugin)

    return register


_T = TypeVar("_T", Backend[Any], ConformanceTarget)


def _named(item: _T, plugin: str) -> _T:
    return replace(item, plugin=plugin)


_default: Registry | None = None


def registry() -> Registry:
    """The process-wide registry, built on first use from the installed plugins."""
    global _default
    if _default is None:
        _default = build_registry(plugin_manager())
    return _default
