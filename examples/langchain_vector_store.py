"""A recallstack vector store as LangChain's `VectorStore`: add documents, search them
with a filter. Offline: LibSQL in a temporary file and the hash embedder.

    pip install "recallstack[langchain,libsql]"
    python examples/langchain_vector_store.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain_core.documents import Document

from recallstack.integrations.langchain import RecallstackEmbeddings, RecallstackVectorStore

with tempfile.TemporaryDirectory() as folder:
    store = RecallstackVectorStore(
        f"libsql:///{Path(folder) / 'notes.db'}", RecallstackEmbeddings("hash/256")
    )
    store.add_documents(
        [
            Document(page_content="Maya is vegetarian and loves Kyoto", metadata={"user": "maya"}),
            Document(
                page_content="Maya's sourdough starter is called Bob", metadata={"user": "maya"}
            ),
            Document(page_content="Sam repairs old road bikes", metadata={"user": "sam"}),
        ]
    )
    for doc, score in store.similarity_search_with_score(
        "what does maya eat in kyoto", k=2, filter={"user": "maya"}
    ):
        print(f"{score:.3f}  {doc.page_content}  {doc.metadata}")
    store.close()
