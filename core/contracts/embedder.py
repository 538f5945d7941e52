"""The embedder contract: text in, float32 vectors out, with a model id and a size."""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from recallstack.core.vectors import Matrix


@dataclass(frozen=True)
class Tokenized:
    """A text and its tokens as the model counts them (`Embedder.tokenize`): where each
    starts, and what the model needs to embed the text without tokenizing it again
    (`encoding`, its own object; None when it has none). Chunking makes these, so a
    chunk is tokenized once, whether it is measured, checked or embedded. Two are
    equal when their texts are."""

    text: str
    offsets: Sequence[int] = field(compare=False)
    encoding: object | None = field(default=None, compare=False)


class Embedder(ABC):
    """Turns texts into vectors.

    An input holds at most `max_input` tokens as `token_offsets` counts them
    (the memory cuts longer texts into chunks that fit); `batch_size` inputs
    go in one call.
    """

    model_id: str
    dimension: int
    max_input: int = 256
    batch_size: int = 64

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed texts; returns a float32 array of shape (len(texts), dimension).

        Raises `EmbeddingRefusedError` when some inputs could not be embedded
        (over the limit, refused by a server): the others' vectors come with it.
        """

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        """`embed`, awaited. This default runs it in a worker thread, where a local
        model's computation leaves the event loop free; an embedder with an
        asynchronous client (`openai/...`) overrides it."""
        return await asyncio.to_thread(self.embed, texts)

    def close(self) -> None:
        """Release what the embedder opened (an HTTP client's connections). A memory
        that built the embedder from a name closes it; this default has nothing to do."""

    async def aclose(self) -> None:
        """Release what `aembed` opened, on its event loop; this default has nothing to do."""

    def token_offsets(self, text: str) -> Sequence[int]:
        """The character offset where each of the text's tokens starts, as the model counts.

        This default counts each UTF-8 byte as a token: a byte-level tokenizer
        never makes more, so the bound is safe for a model whose tokenizer is
        not known. Embedders that know their tokenizer override it.
        """
        return [i for i, char in enumerate(text) for _ in range(_utf8_length(char))]

    def tokenize(self, text: str) -> Tokenized:
        """The text's tokens (`token_offsets`); a model with an encoding of its own
        overrides it to keep that too."""
        return Tokenized(text, self.token_offsets(text))

    def embed_tokenized(self, inputs: Sequence[Tokenized]) -> Matrix:
        """`embed` for texts tokenized already (`tokenize`): the limit is checked on
        their counts, and a model that keeps an encoding embeds it. This default
        embeds the texts."""
        return self.embed([i.text for i in inputs])

    async def aembed_tokenized(self, inputs: Sequence[Tokenized]) -> Matrix:
        """`embed_tokenized`, awaited; this default awaits `aembed` on the texts."""
        return await self.aembed([i.text for i in inputs])

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Each input's length in tokens, as `token_offsets` counts them."""
        return [len(self.token_offsets(t)) for t in texts]

    def over_limit(self, counts: Sequence[int]) -> dict[int, str]:
        """The inputs longer than `max_input`, by position, with what is wrong, from
        their `token_counts`."""
        return {
            i: f"{n} tokens, over the {self.model_id} limit of {self.max_input}"
            for i, n in enumerate(counts)
            if n > self.max_input
        }


def _utf8_length(char: str) -> int:
    code = ord(char)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


def index_name(model_id: str, dimension: int) -> str:
    """The logical index name for an embedder: `memory_messages_<model>_<dimension>`.

    Every read and write path derives the name here, so that vectors of two
    models (or two sizes of one model) never share an index.
    """
    slug = re.sub(r"[^a-z0-9]+", "_", model_id.lower())
    return f"memory_messages_{slug}_{dimension}"
