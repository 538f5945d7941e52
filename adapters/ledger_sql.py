"""SQL over the index ledger that LibSQL and Postgres share, word for word."""

INDEX_NAMES = """
WITH RECURSIVE n(name) AS (
    SELECT min(index_name) FROM recallstack_message_index
    UNION ALL
    SELECT (SELECT min(index_name) FROM recallstack_message_index WHERE index_name > n.name)
    FROM n WHERE n.name IS NOT NULL
)
SELECT name FROM n WHERE name IS NOT NULL
"""
"""The ledger's distinct index names, by a skip scan of its (index_name, ...) index:
one probe per name, where DISTINCT reads every record (36 ms at a million)."""
