"""The demo (the main job) and the CLI commands around the library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from recallstack import demo
from recallstack.cli import main
from recallstack.core.api.memory import Memory


def test_demo_recalls_the_right_messages(tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'demo.db'}"
    memory = Memory(url, url, "local/all-MiniLM-L6-v2", demo.OPTIONS)
    with open(os.devnull, "w") as quiet:
        outcomes = demo.run(memory, Console(file=quiet))
    assert len(outcomes) == len(demo.conversation()["queries"]) >= 4
    assert all(outcome.found for outcome in outcomes), outcomes
    # hybrid recall's keyword signal puts a weak match on "near" first for one query
    # of this small store (docs/guide.md); the semantic signal alone gets all five first
    assert sum(outcome.first for outcome in outcomes) >= len(outcomes) - 1, outcomes
    plain = {
        **demo.OPTIONS,
        "semantic_recall": {**demo.OPTIONS["semantic_recall"], "hybrid": False},
    }
    with (
        Memory(url, url, "local/all-MiniLM-L6-v2", plain) as semantic,
        open(os.devnull, "w") as quiet,
    ):
        alone = demo.show(semantic, demo.conversation(), Console(file=quiet))
    assert all(outcome.first for outcome in alone), alone


def test_demo_command_runs_offline_and_reruns_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "120"}
    command = [sys.executable, "-m", "recallstack", "demo", "--db", str(tmp_path / "local.db")]
    first = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "saved and indexed 32 messages of 4 conversations" in first.stdout
    assert "I named the starter Gerald" in first.stdout
    assert "<remembered_from_other_conversation>" in first.stdout
    assert "5 of 5 recalls handed the model the right message" in first.stdout
    second = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout == first.stdout
    doctor = [*command[:3], "doctor", "--db", str(tmp_path / "local.db"), "--quiet"]
    checked = subprocess.run(doctor, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-3000:]
    assert "; no drift" in checked.stdout and "in 2 indexes:" in checked.stdout


@pytest.fixture
def cli(tmp_path: Path) -> tuple[CliRunner, list[str]]:
    return CliRunner(), ["--db", str(tmp_path / "cli.db"), "--embedder", "hash/128"]


def test_ingest_recall_threads_reindex(cli: tuple[CliRunner, list[str]], tmp_path: Path) -> None:
    runner, common = cli
    lines = [
        {
            "thread_id": "t1",
            "resource_id": "ada",
            "role": "user",
            "content": "I love hiking in the Alps",
        },
        {"thread_id": "t1", "role": "assistant", "content": "The Alps are great in July"},
        {
            "thread_id": "t2",
            "resource_id": "ada",
            "role": "user",
            "content": "my cat is named Miso",
        },
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = runner.invoke(main, ["ingest", *common, str(source)])
    assert result.exit_code == 0, result.output
    assert "saved 3 messages, indexed 3" in result.output

    result = runner.invoke(
        main, ["recall", *common, "--thread", "t2", "--query", "hiking Alps", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["hits"][0]["thread_id"] == "t1"
    texts = [m["content"] for m in payload["messages"]]
    assert texts[:2] == ["I love hiking in the Alps", "The Alps are great in July"]

    result = runner.invoke(main, ["recall", *common, "--thread", "t2", "--query", "hiking"])
    assert "I love hiking in the Alps" in result.output

    result = runner.invoke(main, ["threads", *common, "--resource", "ada"])
    assert "t1" in result.output and "t2" in result.output

    result = runner.invoke(main, ["reindex", *common])
    assert result.exit_code == 0 and "indexed 0 messages" in result.output
    switched = [*common[:2], "--embedder", "hash/64"]
    result = runner.invoke(main, ["reindex", *switched])
    assert "indexed 3 messages" in result.output


def test_ingest_reports_the_bad_line(cli: tuple[CliRunner, list[str]], tmp_path: Path) -> None:
    runner, common = cli
    source = tmp_path / "bad.jsonl"
    source.write_text(
        '{"thread_id": "t", "resource_id": "r", "role": "user", "content": "ok"}\n{oops\n'
    )
    result = runner.invoke(main, ["ingest", *common, str(source)])
    assert result.exit_code != 0
    assert "line 2" in result.output
    source.write_text('{"thread_id": "nobody", "role": "user", "content": "x"}\n')
    result = runner.invoke(main, ["ingest", *common, str(source)])
    assert "give resource_id" in result.output


def test_ingest_of_1500_lines_indexes_them_all(
    cli: tuple[CliRunner, list[str]], tmp_path: Path
) -> None:
    """One save of 1,500 messages: no statement may grow with the batch (SQLite's
    expression depth of 1,000 stopped it at 985)."""
    runner, common = cli
    source = tmp_path / "long.jsonl"
    lines = [
        {"thread_id": "t", "resource_id": "r", "role": "user", "content": f"note {i}"}
        for i in range(1_500)
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = runner.invoke(main, ["ingest", *common, str(source)])
    assert result.exit_code == 0, result.output
    assert "saved 1500 messages, indexed 1500" in result.stdout
    # not a terminal: a plain line on stderr per batch of 500
    assert result.stderr.splitlines() == [f"ingest: {n:,} of 1,500" for n in (500, 1000, 1500)]
    quiet = runner.invoke(main, ["ingest", *common, "--quiet", str(source)])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def _fails(
    runner: CliRunner, args: list[str], code: int, says: str, stdin: bytes | None = None
) -> None:
    """The command exits with `code` and one line on stderr, never a traceback."""
    result = runner.invoke(main, args, input=stdin)
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("recallstack: error: "), result.stderr
    assert says in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_expected_failures_are_one_line_and_an_exit_code(
    cli: tuple[CliRunner, list[str]], tmp_path: Path
) -> None:
    runner, common = cli
    source = tmp_path / "ok.jsonl"
    source.write_text('{"thread_id": "t", "resource_id": "r", "role": "user", "content": "x"}\n')
    assert runner.invoke(main, ["ingest", *common, str(source)]).exit_code == 0
    _fails(runner, ["recall", *common, "--thread", "nope", "--query", "x"], 1, "does not exist")
    top_0 = ["recall", *common, "--thread", "t", "--query", "x", "--top-k", "0"]
    _fails(runner, top_0, 2, "--top-k")
    _fails(
        runner,
        [
            "recall",
            "--db",
            str(tmp_path / "cli.db"),
            "--embedder",
            "nope/x",
            "--thread",
            "t",
            "--query",
            "x",
        ],
        2,
        "nope",
    )
    (tmp_path / "a-folder.db").mkdir()
    _fails(
        runner, ["threads", "--db", str(tmp_path / "a-folder.db"), "--resource", "r"], 2, "folder"
    )
    debug = runner.invoke(main, ["--debug", "recall", *common, "--thread", "nope", "--query", "x"])
    assert debug.exit_code != 0 and debug.exc_info is not None  # --debug lets it through


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (
            b'{"thread_id": "t", "resource_id": "r", "role": "user", "content": "\xff"}',
            "line 2: not UTF-8",
        ),
        (b"{oops", "line 2: not JSON"),
        (b'["a list"]', "line 2: expected a JSON object"),
        (b'{"thread_id": "t", "role": "user", "content": "x", "colour": "red"}', "colour"),
        (b'{"thread_id": {"$ne": 1}, "role": "user", "content": "x"}', "thread_id"),
        (b'{"thread_id": "t2", "role": "user", "content": "x"}', "give resource_id"),
    ],
)
def test_ingest_checks_the_whole_file_and_writes_nothing_when_a_line_is_bad(
    cli: tuple[CliRunner, list[str]], tmp_path: Path, content: bytes, says: str
) -> None:
    runner, common = cli
    first = b'{"thread_id": "t", "resource_id": "r", "role": "user", "content": "fine"}\n'
    source = tmp_path / "in.jsonl"
    source.write_bytes(first + content + b"\n")
    _fails(runner, ["ingest", *common, str(source)], 1, says)
    memory = Memory(f"libsql:///{tmp_path / 'cli.db'}")
    assert memory.get_thread("t") is None  # not even the first line's thread
    memory.close()


def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    """As `recallstack demo` without `libsql` installed (the import is blocked)."""
    code = "import sys; sys.modules['libsql'] = None; from recallstack.cli import main; main()"
    (tmp_path / "x.db").touch()  # `threads` reads a database: one must be there
    result = subprocess.run(
        [sys.executable, "-c", code, "threads", "--db", str(tmp_path / "x.db"), "--resource", "r"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        "recallstack: error: the libsql backend needs the 'libsql' package: "
        'pip install "recallstack[libsql]"'
    ]


def test_version() -> None:
    import recallstack

    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert recallstack.__version__ in result.output
    assert recallstack.__version__ == "0.1.0"


def test_the_cli_reads_its_backends_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"libsql:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("RECALLSTACK_STORAGE", url)
    monkeypatch.setenv("RECALLSTACK_VECTOR", url)
    monkeypatch.setenv("RECALLSTACK_EMBEDDER", "hash/32")
    source = tmp_path / "in.jsonl"
    source.write_text('{"thread_id": "t", "resource_id": "r", "role": "user", "content": "x"}\n')
    assert CliRunner().invoke(main, ["ingest", str(source)]).exit_code == 0
    memory = Memory(url)
    assert memory.get_thread("t") is not None
    memory.close()


def test_reindex_reports_progress_as_plain_lines_off_a_terminal(
    cli: tuple[CliRunner, list[str]], tmp_path: Path
) -> None:
    runner, common = cli
    source = tmp_path / "five.jsonl"
    source.write_text(
        "".join(
            json.dumps({"thread_id": "t", "resource_id": "r", "role": "user", "content": f"n {i}"})
            + "\n"
            for i in range(5)
        )
    )
    assert runner.invoke(main, ["ingest", *common, str(source)]).exit_code == 0
    switched = [*common[:2], "--embedder", "hash/64"]  # a new index: all five to do
    result = runner.invoke(main, ["reindex", *switched, "--batch-size", "2"])
    assert result.exit_code == 0, result.output
    # each batch of two also indexes the message after it, whose context it holds
    assert result.stderr.splitlines() == ["reindex: 3 of 5", "reindex: 5 of 5"]
    assert "indexed 5 messages" in result.stdout
    quiet = runner.invoke(main, ["reindex", *switched[:2], "--embedder", "hash/32", "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
