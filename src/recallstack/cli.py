"""The `recallstack` command."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from recallstack.core.registry import Backend, registry


@click.group()
def main() -> None:
    """Long-term conversational memory for AI agents."""


def _describe(backend: Backend) -> dict[str, Any]:
    caps = backend.capabilities
    return {
        "kind": backend.kind,
        "name": backend.name,
        "schemes": list(backend.schemes),
        "plugin": backend.plugin,
        "description": backend.description,
        "installed": backend.missing_module() is None,
        "install": f'pip install "recallstack[{backend.extra}]"' if backend.extra else None,
        "capabilities": None if caps is None else json.loads(caps.model_dump_json()),
    }


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def backends(as_json: bool) -> None:
    """List the registered backends, their URL schemes and capabilities."""
    rows = [_describe(b) for b in registry().all()]
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    table = Table("kind", "name", "schemes", "plugin", "installed", "capabilities")
    for row in rows:
        caps = row["capabilities"]
        summary = ""
        if caps is not None:
            summary = (
                f"operators: {' '.join(sorted(caps['operators']))}\n"
                f"metrics: {', '.join(sorted(caps['metrics']))}; "
                f"{'exact' if caps['exact'] else 'approximate'} search"
            )
            if caps["stand_in"]:
                summary += f"\ntested against a stand-in: {caps['stand_in']}"
        separator = "/" if row["kind"] == "embedder" else ":"
        table.add_row(
            row["kind"],
            row["name"],
            ", ".join(s + separator for s in row["schemes"]),
            row["plugin"],
            "yes" if row["installed"] else f"no: {row['install']}",
            summary,
        )
    Console().print(table)


@main.command()
@click.option("--backend", "backends_", multiple=True, help="A backend name (throwaway instance).")
@click.option("--url", "urls", multiple=True, help="A deployment URL (cleans up what it made).")
@click.option("--report", type=click.Path(dir_okay=False), help="Write FILE.json or FILE.md.")
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def conformance(
    backends_: tuple[str, ...],
    urls: tuple[str, ...],
    report: str | None,
    pytest_args: tuple[str, ...],
) -> None:
    """Run the conformance suite on backends; extra arguments go to pytest."""
    try:
        import pytest
    except ImportError as exc:
        raise click.ClickException(
            'the suite needs: pip install "recallstack[conformance]"'
        ) from exc
    from recallstack.conformance.plugin import CASES

    if not backends_ and not urls:
        raise click.UsageError("name at least one --backend or --url")
    args = ["-p", "no:cacheprovider", "-q", str(CASES), *pytest_args]
    for name in backends_:
        args += ["--recallstack-backend", name]
    for url in urls:
        args += ["--recallstack-url", url]
    if report:
        args += ["--recallstack-report", report]
    raise SystemExit(pytest.main(args))
