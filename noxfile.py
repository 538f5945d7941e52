"""Lint, type-check, test and conformance sessions. `nox` runs them all; `nox -l` lists them.

Each conformance session installs only the core and one backend's extra, which
proves the extras are independent, then writes its report to reports/. The
`conformance` session merges them into docs/conformance.json and the table in
docs/backends/conformance.md; on CI it fails instead when the committed table is stale.

Sessions tagged `parallel` wait on engines more than on the CPU; `.ci/run` runs
them two at a time (`.ci/sessions.py`), plain `nox` one by one.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nox

PYTHON = "3.11"
BACKENDS: dict[str, str | None] = {
    "memory": None,
    "libsql": "libsql",
    "pg": "pg-server",
    "qdrant-edge": "qdrant",
    "qdrant": "qdrant",
    "chroma": "chroma",
    "mongo": "mongomock",
    "pinecone": "pinecone",
}
"""Backend name → the extra its conformance session installs (`mongomock` is `mongo` and its
stand-in; the session also runs SecantusDB, a server, in a venv of its own. Pinecone's
emulator ships with its adapter)."""

INTEGRATIONS = ("langchain", "llamaindex", "openai_agents", "pydantic_ai")
"""Modules of recallstack.integrations; each has an extra (its name with `-` for `_`),
tests/integrations/test_<name>.py and examples/<name>_*.py."""

nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    *(f"conformance-{name}" for name in BACKENDS),
    "conformance",
    *(f"integration-{name.replace('_', '-')}" for name in INTEGRATIONS),
    "reliability",
    "serve",
    "inspector",
]
nox.options.error_on_missing_interpreters = True
nox.options.default_venv_backend = "uv|virtualenv"
"""uv makes a session's venv and installs into it in seconds where pip takes half a minute
(about seven minutes of CI); without uv, nox falls back to virtualenv and pip."""

TORCH = "torch==2.13.0"
"""The CPU build; installed first so that sentence-transformers does not pull a CUDA one."""
REPORTS = Path("reports")
MATRIX = Path("docs/conformance.json")
TABLE = Path("docs/backends/conformance.md")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the installed package (as users get it), with every extra but
    `local`: torch and sentence-transformers are read as untyped (pyproject.toml), which
    saves installing them here."""
    backends = "libsql,pg-server,qdrant,chroma,mongomock,pinecone"
    integrations = ",".join(i.replace("_", "-") for i in INTEGRATIONS)
    extras = f"conformance,{backends},openai,server,otel,{integrations}"
    session.install(f".[{extras}]", "mypy>=1.10", "types-greenlet")
    python = os.path.join(session.virtualenv.bin, "python")
    session.run("mypy", "-p", "recallstack", "--python-executable", python)


def install_torch(session: nox.Session) -> None:
    """torch's CPU build, through pip: pip takes it from the wheels this machine keeps
    beside PyPI (its find-links), where uv reads only PyPI, whose build is CUDA's. What
    the session installs next keeps it."""
    session.install("pip")  # a uv venv has none
    session.run_install("python", "-m", "pip", "install", "-q", TORCH)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The unit tests: core, memory, embedders (the real local model), demo and CLI."""
    install_torch(session)
    session.install(
        "-e", ".[dev,libsql,pg-server,qdrant,chroma,mongomock,pinecone,local,openai,server]"
    )
    junit = f"--junitxml={REPORTS / 'junit-tests.xml'}"
    # -n auto: pytest-xdist, one worker per core; then the timing-sensitive ones alone
    # each integration runs in its own session, with its framework; the browser test too
    skip = ["--ignore=tests/integrations", "--ignore=tests/browser"]
    session.run("pytest", "-n", "auto", "-m", "not alone", *skip, junit, *session.posargs)
    alone = f"--junitxml={REPORTS / 'junit-tests-alone.xml'}"
    session.run("pytest", "-m", "alone", *skip, alone, *session.posargs)


def _conformance(name: str, extra: str | None) -> None:
    @nox.session(name=f"conformance-{name}", python=PYTHON, tags=["parallel"])
    def run(session: nox.Session) -> None:
        extras = ",".join(e for e in ("conformance", extra) if e)
        session.install(f".[{extras}]")
        _suite(session, name, name)
        if name != "mongo":
            return
        for mode, standalone in (("secantusdb", False), ("secantusdb-standalone", True)):
            with secantusdb(session, standalone=standalone) as url:
                env = {"RECALLSTACK_MONGODB_URL": url, "RECALLSTACK_MONGODB_MODE": mode}
                chosen = f"{mode} and not ({' or '.join(SECANTUSDB_BUGS)})"
                _suite(session, name, f"mongo-{mode}", "-k", chosen, env=env)
                junit = f"--junitxml={REPORTS / f'junit-test-mongo-{mode}.xml'}"
                session.run("pytest", "tests/test_mongo.py", "-k", "a-server", junit, env=env)


def _suite(session: nox.Session, backend: str, report: str, *args: str, **run: Any) -> None:
    """The conformance suite on one backend's targets, its report in reports/."""
    session.run(
        "recallstack",
        "conformance",
        "--backend",
        backend,
        "--report",
        str(REPORTS / f"conformance-{report}.json"),
        "--",
        "--hypothesis-show-statistics",  # how many cases the property tests tried
        f"--junitxml={REPORTS / f'junit-conformance-{report}.xml'}",  # counted by .ci/summary.py
        *args,
        **run,
    )


SECANTUSDB = "secantusdb==0.7.0b3"
"""A MongoDB wire-protocol server from PyPI (beta, GPL-2.0): installed in a virtualenv of
its own and run as a server, never beside recallstack (docs/backends/mongo.md)."""
SECANTUSDB_BUGS = ("test_date_range",)
"""Cases SecantusDB's engine answers wrongly, by name, each reproduced in
docs/backends/mongo.md; deselected on its targets only (mongomock and real deployments
still run them)."""


@contextmanager
def secantusdb(session: nox.Session, *, standalone: bool) -> Iterator[str]:
    """A SecantusDB server on a free loopback port, a replica set unless `standalone`
    (then writes go in chunks: no transactions), stopped afterwards."""
    venv = Path(".nox/secantusdb-server")
    server = venv / "bin" / "secantusd-py"
    if not server.exists():
        session.run(sys.executable, "-m", "venv", "--clear", str(venv), external=True)
        session.run(str(venv / "bin" / "pip"), "install", "-q", SECANTUSDB, external=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="secantusdb-") as data:
        command = [str(server), "--host", "127.0.0.1", "--port", str(port), "--storage-path", data]
        log = open(Path(data) / "server.log", "w")  # noqa: SIM115
        process = subprocess.Popen(
            [*command, *(["--standalone"] if standalone else [])], stdout=log, stderr=log
        )
        try:
            _listening(port, process)
            yield f"mongodb://127.0.0.1:{port}/?directConnection=true"
        finally:
            process.terminate()
            process.wait(timeout=60)
            log.close()


def _listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(3)  # it answers `ping` about 2 s after it listens
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("secantusd-py did not start") from None
            time.sleep(0.5)


for _name, _extra in BACKENDS.items():
    _conformance(_name, _extra)


def _integration(name: str) -> None:
    extra = name.replace("_", "-")

    @nox.session(name=f"integration-{extra}", python=PYTHON, tags=["parallel"])
    def run(session: nox.Session) -> None:
        """The framework's own standard tests, with only the core, LibSQL, Postgres and
        that framework installed, then its examples (offline: the hash embedder)."""
        session.install(f".[{extra},libsql,pg-server]", *INTEGRATION_TESTS[name], "pytest-asyncio")
        junit = f"--junitxml={REPORTS / f'junit-integration-{name}.xml'}"
        test = f"tests/integrations/test_{name}.py"
        session.run("pytest", "-o", "asyncio_mode=auto", junit, test, *session.posargs)
        for example in sorted(Path("examples").glob(f"{name}_*.py")):
            session.run("python", str(example))


INTEGRATION_TESTS = {
    "langchain": ["langchain-tests>=1.1"],
    "llamaindex": [],
    "openai_agents": [],
    "pydantic_ai": [],
}
"""What each integration's tests need beside its extra: the framework's test kit."""

for _integration_name in INTEGRATIONS:
    _integration(_integration_name)


@nox.session(python=PYTHON)
def reliability(session: nox.Session) -> None:
    """Kills, server outages and load on real engines; prints a table, fails on any loss."""
    session.install(".[libsql,pg-server,chroma]")
    # 6 kills per operation and backend and 5-second runs, not the bench's 20 and 8 s:
    # CI's time is bounded
    given = session.posargs or ["--kills", "6", "--seconds", "5"]
    session.run("python", "bench/reliability.py", *given)
    if not session.posargs:  # and a short run with hybrid recall and contextual vectors
        args = ["--only", "kill,load", "--kills", "1", "--seconds", "2", "--context"]
        session.run("python", "bench/reliability.py", *args)


@nox.session(python=PYTHON)
def serve(session: nox.Session) -> None:
    """bench/serve.py: `recallstack serve` under concurrent clients beside the Python API,
    on LibSQL and Postgres; fails if a message is lost. CI runs a small size."""
    session.install(".[libsql,pg-server,server]", "httpx")
    given = session.posargs or ["--clients", "50", "--requests", "500"]
    for backend in ("libsql", "pg"):
        session.run("python", "bench/serve.py", "--backend", backend, *given)


@nox.session(python=PYTHON)
def inspector(session: nox.Session) -> None:
    """The memory inspector in a real browser (tests/browser/): Debian's Chromium, which
    `.ci/run` installs, driven by Playwright (no browser download), against `recallstack
    serve` on the demo's data and model; the screenshot goes to reports/inspector.png."""
    install_torch(session)
    session.install(".[libsql,server,local]", "playwright>=1.40", "pytest>=8", "httpx")
    junit = f"--junitxml={REPORTS / 'junit-inspector.xml'}"
    session.run("pytest", "tests/browser", junit, *session.posargs)


@nox.session(python=PYTHON, default=False)
def peers(session: nox.Session) -> None:
    """bench/peers.py: recallstack, mem0 and LangChain on the same LoCoMo turns and model,
    on Postgres and on Qdrant. Not part of `nox`:
    `nox -s peers -- ../shared/data/locomo/locomo-dev.json`."""
    install_torch(session)
    session.install(
        ".[pg-server,libsql,qdrant,local]",
        "mem0ai>=2.2",
        "langchain-postgres>=0.0.15",
        "langchain-qdrant>=0.2",
        "langchain-huggingface>=1",
    )
    session.run("python", "bench/peers.py", *session.posargs)


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """Merge the backends' reports into the matrix and its table in docs/backends/."""
    session.install(".")
    modes = ("mongo-secantusdb", "mongo-secantusdb-standalone")
    reports = [str(REPORTS / f"conformance-{name}.json") for name in [*BACKENDS, *modes]]
    check = ["--check"] if os.environ.get("CI") else []
    session.run(
        "python",
        "-m",
        "recallstack.conformance.matrix",
        *reports,
        "--matrix",
        str(MATRIX),
        "--page",
        str(TABLE),
        *check,
    )
