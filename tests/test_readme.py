"""The README tells the truth: its commands and its backend table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from recallstack.conformance.matrix import with_table
from recallstack.conformance.report import Report

ROOT = Path(__file__).parent.parent


def test_backend_table_matches_the_committed_matrix() -> None:
    readme = (ROOT / "README.md").read_text()
    matrix = Report.model_validate_json((ROOT / "docs" / "conformance.json").read_text())
    assert readme == with_table(readme, matrix), "README table is stale: run `nox -s conformance`"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[1] == "bash .ci/run"  # CI runs exactly the README's test command
    run = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/nox\n" in run and "python3 .ci/summary.py" in run


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
