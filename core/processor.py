"""What memory processors share: the per-request context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recallstack.core.inputs import check_id


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
