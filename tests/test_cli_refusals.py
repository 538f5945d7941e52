"""Every subcommand refuses bad arguments, missing and unwritable paths, malformed
JSON-lines shapes and deep nesting the same way: one line on stderr, the documented
exit code (1 input or data, 2 usage), and not a file made, the database's included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from recallstack.cli import EXIT_FAILURE, EXIT_USAGE, main

HASH = ["--embedder", "hash/32"]
GOOD = '{"thread_id": "t", "resource_id": "r", "role": "user", "content": "fine"}\n'
DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested far deeper than Python's parser goes."""
NESTED_METADATA = {"metadata": json.loads("{" + '"a": {' * 40 + "}" * 40 + "}")}
"""Metadata nested deeper than the library takes (32 levels), within the parser's reach."""


def message_line(**changes: object) -> str:
    line = {"thread_id": "t", "resource_id": "r", "role": "user", "content": "x", **changes}
    return json.dumps(line)


INPUTS = {
    "deep.jsonl": GOOD + DEEP + "\n",
    "deep-metadata.jsonl": GOOD + message_line(**NESTED_METADATA) + "\n",
    "list.jsonl": GOOD + "[1, 2]\n",
    "string.jsonl": GOOD + '"a message"\n',
    "id-as-object.jsonl": GOOD + message_line(thread_id={"$ne": 1}) + "\n",
    "type-as-list.jsonl": '{"type": ["message"], "data": {}}\n',
    "type-unknown.jsonl": '{"type": "shoe", "data": {}}\n',
    "data-missing.jsonl": '{"type": "thread"}\n',
    "data-as-list.jsonl": '{"type": "message", "data": []}\n',
    "dump-deep.jsonl": DEEP + "\n",
    "not-json.jsonl": "{oops\n",
}

CASES: list[tuple[str, list[str], int, str]] = [
    # bad arguments
    ("threads, empty resource", ["threads", "--resource", ""], EXIT_USAGE, "resource_id"),
    ("recall, empty thread", ["recall", "--thread", "", "--query", "x"], EXIT_USAGE, "thread_id"),
    ("recall, empty query", ["recall", "--thread", "t", "--query", " "], EXIT_USAGE, "--query"),
    ("recall, top-k 0", ["recall", "--thread", "t", "--query", "x", "--top-k", "0"], EXIT_USAGE,
     "--top-k"),
    ("reindex, batch size 0", ["reindex", "--batch-size", "0"], EXIT_USAGE, "--batch-size"),
    ("an embedder of no size", ["ingest", "--embedder", "hash/abc", "good.jsonl"], EXIT_USAGE,
     "hash/abc"),
    ("an unknown embedder", ["ingest", "--embedder", "nope/x", "good.jsonl"], EXIT_USAGE, "nope"),
    ("an unknown storage", ["threads", "--storage", "bogus://x", "--resource", "r"], EXIT_USAGE,
     "bogus"),
    ("an unknown option", ["threads", "--resource", "r", "--colour"], EXIT_USAGE, "--colour"),
    ("an unknown command", ["frobnicate"], EXIT_USAGE, "frobnicate"),
    ("conformance, unknown backend", ["conformance", "--backend", "nope"], EXIT_USAGE, "nope"),
    ("conformance, nothing named", ["conformance"], EXIT_USAGE, "--backend"),
    ("migrate, a malformed target", ["migrate", "--from", "libsql:///good.db", "--to",
     "postgresql://u:p@[::1/x"], EXIT_USAGE, "IPv6"),
    # missing and unwritable paths
    ("ingest, missing file", ["ingest", "missing.jsonl"], EXIT_USAGE, "missing.jsonl"),
    ("import, missing file", ["import", "missing.jsonl"], EXIT_USAGE, "missing.jsonl"),
    ("threads, missing database", ["threads", "--db", "missing.db", "--resource", "r"],
     EXIT_USAGE, "missing.db"),
    ("recall, missing database", ["recall", "--db", "missing.db", "--thread", "t", "--query",
     "x"], EXIT_USAGE, "missing.db"),
    ("reindex, missing database", ["reindex", "--db", "missing.db"], EXIT_USAGE, "missing.db"),
    ("doctor, missing database", ["doctor", "--db", "missing.db"], EXIT_USAGE, "missing.db"),
    ("export, missing database", ["export", "--db", "missing.db"], EXIT_USAGE, "missing.db"),
    ("migrate, missing source", ["migrate", "--from", "libsql:///missing.db", "--to",
     "libsql:///copy.db"], EXIT_USAGE, "missing.db"),
    ("export into a missing folder", ["export", "--db", "good.db", "-o", "no/such/out.jsonl"],
     EXIT_USAGE, "does not exist"),
    ("export onto a folder", ["export", "--db", "good.db", "-o", "a-folder"], EXIT_USAGE,
     "folder"),
    ("export under a file", ["export", "--db", "good.db", "-o", "good.jsonl/out.jsonl"],
     EXIT_USAGE, "does not exist"),
    ("a database in a missing folder", ["ingest", "--db", "no/such/x.db", "good.jsonl"],
     EXIT_USAGE, "does not exist"),
    ("a database that is a folder", ["ingest", "--db", "a-folder", "good.jsonl"], EXIT_USAGE,
     "folder"),
    ("conformance report in a missing folder", ["conformance", "--backend", "memory",
     "--report", "no/such/r.json"], EXIT_USAGE, "does not exist"),
    # malformed JSON lines and deep nesting
    ("ingest, nested 100,000 deep", ["ingest", "deep.jsonl"], EXIT_FAILURE,
     "line 2: nested too deeply"),
    ("ingest, metadata nested 40 deep", ["ingest", "deep-metadata.jsonl"], EXIT_FAILURE,
     "line 2"),
    ("ingest, a list", ["ingest", "list.jsonl"], EXIT_FAILURE, "line 2: expected a JSON object"),
    ("ingest, a string", ["ingest", "string.jsonl"], EXIT_FAILURE, "line 2"),
    ("ingest, an object as id", ["ingest", "id-as-object.jsonl"], EXIT_FAILURE, "thread_id"),
    ("ingest, not JSON", ["ingest", "not-json.jsonl"], EXIT_FAILURE, "line 1: not JSON"),
    ("import, type a list", ["import", "type-as-list.jsonl"], EXIT_FAILURE, "line 1: expected"),
    ("import, unknown type", ["import", "type-unknown.jsonl"], EXIT_FAILURE, "line 1: expected"),
    ("import, no data", ["import", "data-missing.jsonl"], EXIT_FAILURE, "line 1"),
    ("import, data a list", ["import", "data-as-list.jsonl"], EXIT_FAILURE, "line 1"),
    ("import, nested 100,000 deep", ["import", "dump-deep.jsonl"], EXIT_FAILURE,
     "line 1: nested too deeply"),
]  # fmt: skip


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a good input file, a good database, a folder, and the inputs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.jsonl").write_text(GOOD)
    (tmp_path / "a-folder").mkdir()
    for name, text in INPUTS.items():
        (tmp_path / name).write_text(text)
    done = CliRunner().invoke(main, ["ingest", "--db", "good.db", *HASH, "good.jsonl"])
    assert done.exit_code == 0, done.output
    return tmp_path


def files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith("good.db")  # a read may touch its -wal
    }


@pytest.mark.parametrize(("case", "args", "code", "says"), CASES, ids=[c[0] for c in CASES])
def test_a_refused_command_says_one_line_and_makes_no_file(
    workdir: Path, case: str, args: list[str], code: int, says: str
) -> None:
    before = files(workdir)
    uses_embedder = any(a.startswith("--embedder") for a in args)
    memory_command = args[0] in ("ingest", "import", "reindex", "recall", "doctor")
    extra = HASH if memory_command and not uses_embedder else []
    result = CliRunner().invoke(main, [args[0], *extra, *args[1:]])
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("recallstack: error: ") and says in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert files(workdir) == before  # no database, -wal or -shm, no output file


def test_an_unexpected_error_is_one_line_asking_for_a_report(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug (here, a failure planted in the storage) exits 3 and says where to report it."""
    from recallstack.adapters.libsql.storage import LibSQLStorage

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("planted")

    monkeypatch.setattr(LibSQLStorage, "list_threads", broken)
    result = CliRunner().invoke(main, ["threads", "--db", "good.db", "--resource", "r"])
    assert result.exit_code == 3
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("recallstack: unexpected KeyError: 'planted'") and "report" in line
