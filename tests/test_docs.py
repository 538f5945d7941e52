"""The documentation keeps up with the code: every hook and public name is documented,
every hook is tested, every `§` reference and every link resolves, and the README
stays a front door."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import recallstack
from recallstack.core.runtime import hookspecs

ROOT = Path(__file__).parent.parent
DOCS = sorted((ROOT / "docs").rglob("*.md"))
README = ROOT / "README.md"
SPEC = ROOT / "docs" / "spec"
SOURCES = [
    p
    for folder in (
        "core",
        "adapters",
        "embedders",
        "integrations",
        "conformance",
        "src",
        "tests",
        "bench",
    )
    for p in (ROOT / folder).rglob("*.py")
]
HOOKS = sorted(
    name
    for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
    if hasattr(function, "recallstack_spec")
)
REFERENCE = re.compile(r"(?:([\w./-]*?)([\w-]+\.md) )?§(\d+)((?:(?:,| and|-) ?§?\d+)*)")


def all_docs() -> str:
    return "\n".join(p.read_text() for p in [README, *DOCS])


def test_the_readme_is_a_front_door() -> None:
    assert len(README.read_bytes()) <= 12 * 1024


def test_there_are_hooks() -> None:
    assert HOOKS == [
        "register_conformance_targets",
        "register_embedders",
        "register_storages",
        "register_vector_stores",
    ]


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_and_tested(hook: str) -> None:
    assert inspect.getdoc(getattr(hookspecs, hook)), f"{hook} has no docstring"
    assert f"`{hook}`" in (ROOT / "docs" / "plugins.md").read_text(), f"{hook}: docs/plugins.md"
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    assert f"def {hook}(" in tests, f"{hook} is implemented by no test plugin"


@pytest.mark.parametrize("name", sorted(set(recallstack.__all__) - {"__version__"}))
def test_every_public_name_is_documented(name: str) -> None:
    assert re.search(rf"`{re.escape(name)}[`(.\[]", all_docs()), f"{name} is in no doc"


def _references() -> list[tuple[Path, str, int]]:
    """(where, spec file, section) for every `§` reference in the code and the docs."""
    found = []
    for path in [*SOURCES, README, *DOCS]:
        for match in REFERENCE.finditer(path.read_text()):
            _, name, first, more = match.groups()
            if name is None:
                assert path.parent == SPEC, f"{path}: a bare §{first} outside docs/spec/"
                name = path.name
            for number in [first, *re.findall(r"\d+", more)]:
                found.append((path.relative_to(ROOT), name, int(number)))
    return found


def test_every_section_reference_resolves() -> None:
    references = _references()
    assert len(references) > 20
    for where, name, number in references:
        spec = SPEC / name
        assert spec.exists(), f"{where}: {name} is not in docs/spec/"
        heading = re.compile(rf"^## {number}\. ", re.M)
        assert heading.search(spec.read_text()), f"{where}: {name} has no section {number}"


def test_every_link_resolves() -> None:
    for path in [README, *DOCS]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)}: {target}"
