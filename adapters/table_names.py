"""Physical names (tables, collections) for logical index names, shared by the adapters."""

from __future__ import annotations

import hashlib
import re


def table_name(index: str) -> str:
    """`rsv_<slug>_<hash>`: a valid, deterministic SQL identifier for any index name.

    The slug is the name lowercased with runs outside [a-z0-9] turned into `_`,
    cut to 40 characters; the hash (10 hex of SHA-1 of the name) keeps distinct
    names apart. At most 55 characters, so suffixed index names fit Postgres's 63.
    """
    slug = re.sub(r"[^a-z0-9]+", "_", index.lower())[:40]
    return f"rsv_{slug}_{hashlib.sha1(index.encode()).hexdigest()[:10]}"
