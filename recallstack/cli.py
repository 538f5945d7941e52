"""The `recallstack` command."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from recallstack.core.filters import REQUIRED_OPERATORS
from recallstack.core.registry import registry


@click.group()
def main() -> None:
    """Long-term conversational memory for AI agents."""


@main.command()
def backends() -> None:
    """List the registered backends, their URL schemes and capabilities."""
    table = Table("kind", "name", "schemes", "plugin", "installed", "capabilities")
    for backend in registry().all():
        missing = backend.missing_module()
        installed = "yes" if missing is None else f'no: pip install "recallstack[{backend.extra}]"'
        caps = backend.capabilities
        summary = ""
        if caps is not None:
            extended = sorted(caps.operators - REQUIRED_OPERATORS)
            summary = (
                f"metrics: {', '.join(sorted(caps.metrics))}; "
                f"extra operators: {' '.join(extended) or 'none'}; "
                f"{'exact' if caps.exact else 'approximate'} search"
            )
            if caps.stand_in:
                summary += f"; tested against a stand-in: {caps.stand_in}"
        schemes = ", ".join(f"{s}:" if backend.kind != "embedder" else f"{s}/" for s in backend.schemes)
        table.add_row(backend.kind, backend.name, schemes, backend.plugin, installed, summary)
    Console(width=160).print(table)
