"""How often the local model's tokenizer reads each text a save and a recall embed, and
what they cost: 2,000 messages saved 100 at a time into `memory://`, then 200 recalls of
new queries.

    python bench/tokenize_once.py

Chunking tokenizes a text and hands the embedder its encoding (`Tokenized`), so a
chunk is tokenized once; the count is read through a proxy around the tokenizer.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from recallstack import Memory, Message
from recallstack.embedders.local import LocalEmbedder


class Counting:
    """The tokenizer, counting the texts it encodes."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer, self.texts = tokenizer, 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.tokenizer, name)
        if name not in ("encode", "encode_batch"):
            return method

        def counted(value: Any, *args: Any, **kwargs: Any) -> Any:
            self.texts += len(value) if name == "encode_batch" else 1
            return method(value, *args, **kwargs)

        return counted


def main() -> None:
    model = LocalEmbedder()
    tokenizer = Counting(model._model.tokenizer)
    model._model = dataclasses.replace(model._model, tokenizer=tokenizer)
    texts = [
        f"Message {i}: we talked about the trip to Kyoto, temples in autumn and the food "
        f"at the market number {i}."
        for i in range(2000)
    ]
    with Memory("memory://", "memory://", model, {"semantic_recall": {"top_k": 4}}) as memory:
        memory.create_thread("ada", thread_id="t")
        start = time.perf_counter()
        for first in range(0, len(texts), 100):
            memory.save_messages(
                [
                    Message(id=f"m{i}", thread_id="t", role="user", content=texts[i])
                    for i in range(first, first + 100)
                ]
            )
        saving = time.perf_counter() - start
        saved = tokenizer.texts
        start = time.perf_counter()
        for q in range(200):
            memory.recall("t", vector_search_string=f"temples in autumn {q}")
        recalling = time.perf_counter() - start
    print(
        f"save: {len(texts) / saving:,.0f} messages/s, "
        f"{saved / len(texts):.2f} tokenizer passes per message"
    )
    print(
        f"recall: {recalling / 200 * 1000:.2f} ms, "
        f"{(tokenizer.texts - saved) / 200:.2f} tokenizer passes per query"
    )


if __name__ == "__main__":
    main()
