"""recallstack: long-term conversational memory for AI agents."""

from importlib.metadata import version as _version

from recallstack.core.api.async_memory import AsyncMemory
from recallstack.core.api.memory import Memory
from recallstack.core.api.message_history import MessageHistory
from recallstack.core.api.operations import (
    RecallResult,
    SaveResult,
    SearchHit,
    ThreadUpdateResult,
)
from recallstack.core.api.reindexing import ReindexResult
from recallstack.core.contracts.capabilities import Capabilities
from recallstack.core.contracts.embedder import Embedder, index_name
from recallstack.core.contracts.processor import Processor, RequestContext
from recallstack.core.contracts.storage import Storage
from recallstack.core.contracts.vector_store import VectorStore
from recallstack.core.errors import (
    BackendError,
    DimensionMismatchError,
    EmbeddingRefusedError,
    FilterError,
    IndexNotFoundError,
    InvalidInputError,
    MissingDependencyError,
    NotFoundError,
    RecallstackError,
    UnknownBackendError,
    UnsupportedFeatureError,
    UnsupportedFilterError,
)
from recallstack.core.filters import matches, parse_filter
from recallstack.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from recallstack.core.recall import Hit, SemanticRecall
from recallstack.core.records import Include, Page, Resource, Thread
from recallstack.core.runtime.config import (
    HybridConfig,
    MemoryConfig,
    MessageRange,
    SemanticRecallConfig,
)
from recallstack.core.runtime.hookspecs import hookimpl
from recallstack.core.runtime.registry import Backend, ConformanceTarget, registry
from recallstack.core.vectors import EVERYWHERE, IndexConfig, IndexStats, Partition, QueryResult

__version__ = _version("recallstack")

__all__ = [
    "EVERYWHERE",
    "AsyncMemory",
    "Backend",
    "BackendError",
    "Capabilities",
    "ConformanceTarget",
    "DimensionMismatchError",
    "Embedder",
    "EmbeddingRefusedError",
    "FilterError",
    "Hit",
    "HybridConfig",
    "Include",
    "IndexConfig",
    "IndexNotFoundError",
    "IndexStats",
    "InvalidInputError",
    "Memory",
    "MemoryConfig",
    "Message",
    "MessageHistory",
    "MessageRange",
    "MissingDependencyError",
    "NotFoundError",
    "Page",
    "Partition",
    "Processor",
    "QueryResult",
    "RecallResult",
    "RecallstackError",
    "ReindexResult",
    "RequestContext",
    "Resource",
    "SaveResult",
    "SearchHit",
    "SemanticRecall",
    "SemanticRecallConfig",
    "Storage",
    "TextPart",
    "Thread",
    "ThreadUpdateResult",
    "ToolCallPart",
    "ToolResultPart",
    "UnknownBackendError",
    "UnsupportedFeatureError",
    "UnsupportedFilterError",
    "VectorStore",
    "__version__",
    "hookimpl",
    "index_name",
    "matches",
    "parse_filter",
    "registry",
]
