"""The conformance suite as a pytest plugin (entry point `pytest11`).

Inactive unless asked for:
- `pytest --recallstack-backend NAME` starts a throwaway instance of each mode
  the backend's plugin registered through `register_conformance_targets`;
- `pytest --recallstack-url URL` runs against your own deployment and removes
  only what the suite created;
- `--recallstack-report FILE.json|FILE.md` writes the backend-by-group matrix.
With no test paths given, the suite's own cases are collected.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CASES = Path(__file__).parent / "cases"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recallstack", "recallstack conformance suite")
    group.addoption(
        "--recallstack-backend",
        action="append",
        default=[],
        metavar="NAME",
        help="run the conformance suite on a throwaway instance of this backend",
    )
    group.addoption(
        "--recallstack-url",
        action="append",
        default=[],
        metavar="URL",
        help="run the conformance suite against your own deployment at URL",
    )
    group.addoption(
        "--recallstack-report",
        default=None,
        metavar="FILE",
        help="write the conformance report to FILE.json or FILE.md",
    )


def pytest_configure(config: pytest.Config) -> None:
    names = config.getoption("recallstack_backend")
    urls = config.getoption("recallstack_url")
    if not names and not urls:
        return
    suite = Suite(names, urls, config.getoption("recallstack_report"))
    config.pluginmanager.register(suite, "recallstack-conformance-suite")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(CASES)]


class Suite:
    """The active suite: its targets, their instances and the report."""

    def __init__(self, names: list[str], urls: list[str], report: str | None) -> None:
        from recallstack.conformance.report import Report
        from recallstack.core.runtime.registry import (
            ConformanceTarget,
            build_registry,
            plugin_manager,
        )

        self.registry = build_registry(plugin_manager())
        self.report_path = Path(report) if report else None
        self.report = Report()
        targets: list[ConformanceTarget] = []
        for name in names:
            found = [t for t in self.registry.targets if t.backend == name]
            if not found:
                known = sorted({t.backend for t in self.registry.targets})
                raise pytest.UsageError(
                    f"no plugin registers a conformance target for {name!r}; known: {known}"
                )
            targets += found
        for url in urls:
            for kind in ("vector", "storage"):
                with contextlib.suppress(LookupError):
                    backend = self.registry.find(kind, url)
                    # whether a given deployment's store awaits its driver is known only
                    # once it is open: its cases run both ways (in a worker thread if not)
                    targets.append(
                        ConformanceTarget(
                            backend=backend.name,
                            kind=kind,
                            start=_given(url),
                            mode=f"url {url}",
                            asyncio_driver=True,
                        )
                    )
        self.targets = targets
        self._urls: dict[int, str] = {}
        self._stack = contextlib.ExitStack()

    def url(self, target: Any) -> str:
        """Start a target's instance once per session."""
        key = id(target)
        if key not in self._urls:
            self._urls[key] = self._stack.enter_context(target.start())
        return self._urls[key]

    def of_kind(self, kind: str) -> list[Any]:
        return [t for t in self.targets if t.kind == kind]

    @pytest.hookimpl
    def pytest_report_header(self) -> list[str]:
        return [
            "recallstack conformance: "
            + ", ".join(f"{t.backend} {t.kind} ({t.mode})" for t in self.targets)
        ]

    @pytest.hookimpl
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        for kind in ("vector", "storage"):
            fixture = f"{kind}_target"
            if fixture in metafunc.fixturenames:
                targets = self.of_kind(kind) or [None]
                metafunc.parametrize(
                    fixture,
                    targets,
                    ids=[_target_id(t) for t in targets],
                    indirect=True,
                    scope="session",
                )

    @pytest.hookimpl
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Cases of a kind no selected backend has are deselected, and said so."""
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            params = getattr(item, "callspec", None)
            absent = params is not None and any(
                params.params.get(f"{k}_target", "") is None for k in ("vector", "storage")
            )
            (drop if absent or self._awaited_in_a_thread(params) else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def _awaited_in_a_thread(self, params: Any) -> bool:
        """A storage- or vector-level case awaited on a store that `AsyncMemory` calls in
        a worker thread: the same method as the blocking case, so it is not run twice
        (the Memory-level cases run that path through AsyncMemory)."""
        if params is None or params.params.get("backend_api") != "awaited":
            return False
        targets = [params.params.get(f"{k}_target") for k in ("vector", "storage")]
        return not any(t.asyncio_driver for t in targets if t)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from recallstack.conformance.report import GROUPS

        if report.when != "call" and report.passed:
            return
        props: dict[str, Any] = dict(report.user_properties)
        target: dict[str, Any] | None = props.get("recallstack_target")
        module = Path(report.location[0]).stem
        if target is None or module not in GROUPS:
            return
        unsupported = [str(v) for k, v in report.user_properties if k == "recallstack_unsupported"]
        self.report.target(**target).record(GROUPS[module], report.passed, unsupported)

    @pytest.hookimpl
    def pytest_sessionfinish(self) -> None:
        self._stack.close()
        if self.report_path is not None:
            self.report.write(self.report_path)

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_sep("=", "recallstack conformance")
        terminalreporter.write_line(self.report.markdown())


def _given(url: str) -> Any:
    @contextmanager
    def start() -> Iterator[str]:
        yield url

    return start


def _target_id(target: Any) -> str:
    if target is None:
        return "absent"
    return f"{target.backend}-{target.mode}".replace(" ", "_")


def _suite(request: pytest.FixtureRequest) -> Suite:
    suite = request.config.pluginmanager.get_plugin("recallstack-conformance-suite")
    if suite is None:
        pytest.fail("the conformance cases need --recallstack-backend or --recallstack-url")
    assert isinstance(suite, Suite)
    return suite


@pytest.fixture(scope="session")
def vector_target(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.fixture(scope="session")
def storage_target(request: pytest.FixtureRequest) -> Any:
    return request.param


def _label(request: pytest.FixtureRequest, target: Any, approximate: bool = False) -> None:
    request.node.user_properties.append(
        (
            "recallstack_target",
            {
                "backend": target.backend,
                "kind": target.kind,
                "mode": target.mode,
                "stand_in": target.stand_in,
                "approximate": approximate,
            },
        )
    )


@pytest.fixture(scope="session")
def opened_vector_store(
    request: pytest.FixtureRequest, vector_target: Any, event_loop_thread: Any
) -> Iterator[Any]:
    """The backend's vector store, one per target and session (closed before the loop
    its awaited calls ran on stops)."""
    suite = _suite(request)
    store = suite.registry.vector_store(suite.url(vector_target), **vector_target.options)
    yield store
    store.close()


@pytest.fixture(scope="session")
def opened_storage(
    request: pytest.FixtureRequest, storage_target: Any, event_loop_thread: Any
) -> Iterator[Any]:
    """The backend's storage, one per target and session (closed before the loop its
    awaited calls ran on stops)."""
    suite = _suite(request)
    store = suite.registry.storage(suite.url(storage_target), **storage_target.options)
    yield store
    store.close()


@pytest.fixture(params=["blocking", "awaited"])
def backend_api(request: pytest.FixtureRequest, event_loop_thread: Any) -> Any:
    """How a storage- or vector-level case calls the backend: directly, or as
    `AsyncMemory` does (awaited on the loop thread), so each such case runs both ways on
    a store that awaits an asyncio driver (`asyncio_driver`)."""
    from recallstack.conformance.async_api import backend_maker

    return backend_maker(request.param, event_loop_thread)


@pytest.fixture
def vector_store(opened_vector_store: Any, backend_api: Any) -> Any:
    """The backend's vector store, called one of `backend_api`'s ways."""
    return backend_api(opened_vector_store)


@pytest.fixture
def storage(opened_storage: Any, backend_api: Any) -> Any:
    """The backend's storage, called one of `backend_api`'s ways."""
    return backend_api(opened_storage)


@contextmanager
def paired(request: pytest.FixtureRequest, store: Any, target: Any) -> Iterator[Any]:
    """The store paired with the reference (`Twin`), its report labelled with the target;
    the indexes the pair made are removed afterwards."""
    from recallstack.conformance.twin import Twin

    _label(request, target, approximate=not store.capabilities.exact)
    pair = Twin(
        store, lambda op: request.node.user_properties.append(("recallstack_unsupported", op))
    )
    yield pair
    pair.cleanup()


@pytest.fixture
def twin(request: pytest.FixtureRequest, vector_store: Any, vector_target: Any) -> Iterator[Any]:
    """The backend paired with the reference; indexes it creates are removed afterwards."""
    with paired(request, vector_store, vector_target) as pair:
        yield pair


@pytest.fixture
def ids(request: pytest.FixtureRequest, opened_storage: Any, storage_target: Any) -> Iterator[Any]:
    """Ids unique to this test; the threads named with them are deleted afterwards."""
    _label(request, storage_target)
    prefix = f"conformance_{uuid.uuid4().hex[:8]}_"
    made: list[str] = []

    def make(name: str) -> str:
        made.append(prefix + name)
        return prefix + name

    yield make
    for thread_id in made:
        opened_storage.delete_thread(thread_id)


@pytest.fixture(scope="session")
def event_loop_thread() -> Iterator[Any]:
    """An event loop in its own thread, on which `AsyncMemory` cases are awaited."""
    from recallstack.conformance.async_api import loop_thread

    with loop_thread() as loop:
        yield loop


@pytest.fixture(params=["Memory", "AsyncMemory"])
def memory_api(request: pytest.FixtureRequest, event_loop_thread: Any) -> Any:
    """Builds the memory of a Memory-level case: each such case runs through `Memory`
    and through `AsyncMemory` (awaited on the loop thread)."""
    from recallstack.conformance.async_api import memory_maker

    return memory_maker(request.param, event_loop_thread)


@pytest.fixture
def memory_over_vector(
    request: pytest.FixtureRequest, opened_vector_store: Any, vector_target: Any, memory_api: Any
) -> Iterator[Any]:
    """A memory with the backend as its vector store (reference storage, hash embedder)."""
    from recallstack.adapters.memory.storage import InMemoryStorage
    from recallstack.embedders.hashing import HashEmbedder

    with paired(request, opened_vector_store, vector_target) as pair:
        name = pair.index(32)
        # the semantic signal alone: one index, the one the pair makes and drops
        options = {"semantic_recall": {"index_name": name, "hybrid": False}}
        yield memory_api(InMemoryStorage(), pair.store, HashEmbedder(32), options)


@pytest.fixture
def memory_over_storage(opened_storage: Any, ids: Any, memory_api: Any) -> Iterator[Any]:
    """A memory with the backend as its storage (reference vector store, hash embedder)."""
    from recallstack.adapters.memory.vector import InMemoryVectorStore
    from recallstack.embedders.hashing import HashEmbedder

    ids("memory")  # labels the report with this storage target
    # the semantic signal alone: hybrid recall's storage calls have their own cases
    # (test_recall_paths, test_memory_lifecycle)
    options = {"semantic_recall": {"hybrid": False}}
    yield memory_api(opened_storage, InMemoryVectorStore(), HashEmbedder(32), options)
