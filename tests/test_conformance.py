"""The conformance suite itself: it runs on third-party plugins and catches broken ones.

Each run is a separate pytest process, as a plugin author would start it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recallstack.conformance.report import GROUPS, Report


def test_suite_passes_on_a_third_party_plugin(
    example_plugin: Path, pytester: pytest.Pytester
) -> None:
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "--recallstack-backend", "example", "--recallstack-report", str(report), "-q"
    )
    result.assert_outcomes(failed=0, errors=0, passed=result.parseoutcomes()["passed"])
    (target,) = Report.model_validate_json(report.read_text()).targets
    assert (target.backend, target.kind) == ("example", "vector")
    groups = target.groups
    assert set(groups) == set(GROUPS.values()) - {"8. Storage"}
    assert all(g.status == "pass" for g in groups.values())
    # the example plugin declares only the required operators: the rest must raise
    assert set(groups["4. Filters"].unsupported) == {"$all", "$exists", "$nor", "$not"}


def test_suite_catches_a_broken_operator(broken_plugin: Path, pytester: pytest.Pytester) -> None:
    report = pytester.path / "report.md"
    # the filter cases, where the broken operator shows: the whole suite takes 40 s
    result = pytester.runpytest_subprocess(
        "--recallstack-backend",
        "broken",
        "--recallstack-report",
        str(report),
        "-q",
        "-k",
        "test_filter or test_differential",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) > 0
    text = result.stdout.str()
    # a readable counterexample: the filter case, what came back and what should have
    assert "test_filter[blocking-broken-default-{'n': {'$ne': 5}}]" in text
    assert "wrong results or order" in text or "results, the reference gives" in text
    # the shrunk counterexample: hypothesis's own line (`filter_={...}`) where its version
    # prints the arguments, and always the failed query's message, which names the filter
    differential = text.partition("test_differential[blocking-broken-default]")[2]
    assert "filter_={" in differential or "query({'filter': " in differential
    assert "| broken | vector | default |" in report.read_text()
    assert "fail" in report.read_text()


def test_url_mode_and_storage(pytester: pytest.Pytester) -> None:
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "--recallstack-url", "memory://", "--recallstack-report", str(report), "-q"
    )
    assert result.ret == 0
    assert "deselected" not in result.parseoutcomes()  # awaited as well as blocking
    kinds = {t.kind: t for t in Report.model_validate_json(report.read_text()).targets}
    assert set(kinds) == {"vector", "storage"}
    assert kinds["storage"].groups["8. Storage"].status == "pass"
    assert kinds["vector"].mode == "url memory://"


def test_inactive_unless_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=1)
    assert "recallstack conformance" not in result.stdout.str()


def test_unknown_backend_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--recallstack-backend", "nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no plugin registers a conformance target for 'nosuch'" in result.stderr.str()


def test_markdown_report_lists_groups_and_stand_ins() -> None:
    report = Report()
    target = report.target("pinecone", "vector", "emulator", "loopback emulator", True)
    target.record("4. Filters", True, ["$all"])
    target.record("1. Index lifecycle", False, [])
    text = report.markdown()
    assert "| pinecone | vector | emulator — stand-in: loopback emulator ≈ |" in text
    assert "≈ approximate search: recall ≥ 0.95 of the exact top-K" in text
    assert "fail" in text and "pass ¹" in text
    assert "checked to raise the documented error:\n- pinecone (vector), 4. Filters: $all" in text
    assert not report.passed
    assert json.loads(report.model_dump_json())["targets"][0]["backend"] == "pinecone"
