"""Lint, type-check and test sessions. `nox` runs them all; `nox -l` lists them."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the installed package (as users get it)."""
    session.install(".", "mypy>=1.10")
    session.run(
        "mypy", "-p", "recallstack", "--python-executable", session.virtualenv.bin + "/python"
    )


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The unit tests of the core and the reference backend."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)
