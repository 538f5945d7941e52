"""Importing an integration whose framework is not installed raises recallstack's
`MissingDependencyError` naming the extra, never a bare ModuleNotFoundError."""

from __future__ import annotations

import importlib
import sys

import pytest

from recallstack.core.errors import MissingDependencyError

INTEGRATIONS = {
    "langchain": ("langchain_core", "langchain"),
    "llamaindex": ("llama_index", "llamaindex"),
    "openai_agents": ("agents", "openai-agents"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
}


@pytest.mark.parametrize("module", sorted(INTEGRATIONS))
def test_a_missing_framework_names_the_extra(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    framework, extra = INTEGRATIONS[module]
    monkeypatch.setitem(sys.modules, framework, None)  # as if not installed
    monkeypatch.delitem(sys.modules, f"recallstack.integrations.{module}", raising=False)
    with pytest.raises(MissingDependencyError, match=rf'pip install "recallstack\[{extra}\]"'):
        importlib.import_module(f"recallstack.integrations.{module}")
