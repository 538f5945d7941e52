"""How much code a save and a recall run through: the recallstack source files they touch and
the Python calls they make inside the package (the backends' drivers not counted).

    python bench/call_paths.py [--hybrid]

On `memory://` stores with the `hash/64` embedder, so that only recallstack's own
code runs: a thread of 20 messages is saved, then one batch of 10 more is saved
and one recall made, each traced alone (sys.setprofile). Written against the
public API, so that the same script measures any two commits (issue 46's note
compares them).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from recallstack import Memory, Message

FOLDERS = {"core", "adapters", "embedders", "integrations", "conformance", "recallstack"}
"""The package's folders, however it is laid out on disk (a checkout, or a copy)."""


def source_name(path: Path) -> str | None:
    """`core/api/memory.py` for a module of the package; None for anything else."""
    if "site-packages" in path.parts or path.suffix != ".py":
        return None
    for n, part in enumerate(path.parts):
        if part in FOLDERS and (part != "recallstack" or n + 1 < len(path.parts)):
            rest = path.parts[n + 1 :] if part == "recallstack" else path.parts[n:]
            return "/".join(rest)
    return None


def traced(action: Callable[[], Any]) -> tuple[set[str], int]:
    files: set[str] = set()
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        name = source_name(Path(frame.f_code.co_filename))
        if name is None:
            return
        files.add(name)
        calls[name] += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return files, sum(calls.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hybrid", action="store_true", help="hybrid recall, context 1")
    args = parser.parse_args()
    recall: dict[str, Any] = {"top_k": 4, "message_range": 1, "scope": "resource"}
    recall["hybrid"] = {"context": 1} if args.hybrid else False
    with Memory("memory://", "memory://", "hash/64", {"semantic_recall": recall}) as memory:
        memory.create_thread("ada", thread_id="t")
        memory.save_messages(
            [
                Message(
                    id=f"m{i}", thread_id="t", role="user", content=f"note {i} on topic {i % 5}"
                )
                for i in range(20)
            ]
        )
        batch = [
            Message(id=f"n{i}", thread_id="t", role="user", content=f"later note {i}")
            for i in range(10)
        ]
        for what, action in (
            ("save 10", lambda: memory.save_messages(batch)),
            ("recall", lambda: memory.recall("t", vector_search_string="topic 3 notes")),
        ):
            files, calls = traced(action)
            core = sorted(f for f in files if f.startswith("core"))
            print(f"{what:8} {len(files):3} files ({len(core)} in core/), {calls:6,} calls")
            for f in sorted(files):
                print(f"         {f}")


if __name__ == "__main__":
    main()
