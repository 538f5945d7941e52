"""Adapters to the interfaces of agent frameworks; each module imports its framework,
so it needs that framework's extra (`pip install "recallstack[langchain]"`)."""
