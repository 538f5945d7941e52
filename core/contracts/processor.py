"""The processor protocol, and the per-request context processors receive."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from recallstack.core.inputs import check_id
from recallstack.core.messages import Message


@dataclass(frozen=True)
class RequestContext:
    """Who is talking, in which thread, with which per-call configuration overrides.

    `config` deep-merges over the processor's own configuration, in the shape
    of `MemoryConfig` (for example `{"semantic_recall": {"top_k": 8}}`).
    """

    thread_id: str
    resource_id: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_id(self.thread_id, "thread_id")
        if self.resource_id is not None:
            check_id(self.resource_id, "resource_id")


@runtime_checkable
class Processor(Protocol):
    """A step of an agent loop's memory: input before the model call, output after.

    Input processors add context to the messages the model will see; output
    processors persist or index what the turn produced. Both return the
    messages they were given, changed or not. `MessageHistory` and
    `SemanticRecall` are the built-in ones; `Memory.processors` lists them.
    """

    id: str
    name: str

    def process_input(self, messages: list[Message], context: RequestContext) -> list[Message]:
        """The messages the model will see, with what this processor adds."""
        ...

    def process_output_result(
        self, messages: list[Message], context: RequestContext
    ) -> list[Message]:
        """Act on the turn's messages (persist, index); returns them."""
        ...
