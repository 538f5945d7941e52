"""The README tells the truth: its commands; and the backend table in the docs, its matrix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recallstack.conformance.matrix import with_table
from recallstack.conformance.report import GROUP_NAMES, Report

ROOT = Path(__file__).parent.parent


def test_backend_table_matches_the_committed_matrix() -> None:
    page = (ROOT / "docs" / "backends" / "conformance.md").read_text()
    matrix = Report.model_validate_json((ROOT / "docs" / "conformance.json").read_text())
    assert page == with_table(page, matrix), "the table is stale: run `nox -s conformance`"


def test_every_backend_the_readme_says_passes_does() -> None:
    matrix = Report.model_validate_json((ROOT / "docs" / "conformance.json").read_text())
    assert matrix.passed
    assert f"passes all {len(GROUP_NAMES)} groups" in (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[1] == "bash .ci/run"  # CI runs exactly the README's test command
    run = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python .ci/sessions.py\n" in run and "python3 .ci/summary.py" in run


NOXFILE = """
import nox

def record(session, name):
    with open("ran.txt", "a") as out:
        out.write(name + "\\n")
    if name == "{failing}":
        session.error("failed on purpose")

@nox.session(venv_backend="none")
def first(session):
    record(session, "first")

for _name in ("one", "two", "three"):
    @nox.session(name=_name, venv_backend="none", tags=["parallel"])
    def _run(session, _name=_name):
        record(session, _name)

@nox.session(venv_backend="none")
def last(session):
    record(session, "last")

@nox.session(venv_backend="none", default=False)
def asked_only(session):
    record(session, "asked_only")
"""


@pytest.mark.parametrize("failing", ["", "two"])
def test_ci_runs_every_default_session_once(tmp_path: Path, failing: str) -> None:
    """.ci/sessions.py runs what plain `nox` runs: the untagged sessions before the
    `parallel` ones first, the `parallel` ones, then the rest; a failure anywhere fails it."""
    (tmp_path / "noxfile.py").write_text(NOXFILE.replace("{failing}", failing))
    script = ROOT / ".ci" / "sessions.py"
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True
    )
    ran = (tmp_path / "ran.txt").read_text().split()
    assert ran[0] == "first" and ran[-1] == "last"
    assert sorted(ran[1:-1]) == ["one", "three", "two"]
    assert done.returncode == (1 if failing else 0), done.stdout + done.stderr


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Python example, as written (LibSQL file and the local model)."""
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```python", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    names: dict[str, Any] = {}
    exec(compile(example, "README.md", "exec"), names)
    result = names["result"]
    assert [h.thread_id for h in result.hits] == ["trip", "trip"]
    assert result.context[0].role == "system" and "Shigetsu" in result.context[0].text
