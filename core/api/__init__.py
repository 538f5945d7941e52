"""The public API: Memory and AsyncMemory, their operations, the processor of the
conversation's history, and what checks and moves a memory (doctor, migration)."""
