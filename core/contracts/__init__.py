"""The contracts a backend implements: storage (with its index ledger), vector store,
embedder, their capabilities; and the processor protocol."""
