"""`recallstack eval locomo`: the LoCoMo protocol on a small file of the same shape (the real
one's licence keeps it out of the repository), its figures checked against what the
questions make certain, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from recallstack import Memory, locomo
from recallstack.cli import EXIT_FAILURE, EXIT_USAGE, main

TOPICS = [
    "marathon training in the rain",
    "a sourdough starter named Gerald",
    "flights to Osaka in October",
    "a job interview at Northwind",
    "repainting the kitchen yellow",
    "adopting a grey cat from the shelter",
]


def conversation(sample_id: str, filler: int = 60) -> dict[str, Any]:
    """Two sessions: one turn per topic among filler turns; a question per topic whose
    words are that turn's, one about two topics (two evidence turns), one whose evidence
    is a turn that does not exist, and an adversarial one (category 5, not asked)."""
    turns = [
        {"speaker": "Ann" if n % 2 else "Ben", "dia_id": f"D1:{n}", "text": f"filler chat {n}"}
        for n in range(filler)
    ]
    for k, topic in enumerate(TOPICS):
        turns[k * 9 + 3]["text"] = f"let me tell you about {topic}"
    second = [{"speaker": "Ann", "dia_id": "D2:1", "text": "hello again", "blip_caption": "a dog"}]
    qa = [
        {"question": f"what about {topic}?", "evidence": [f"D1:{k * 9 + 3}"], "category": 4}
        for k, topic in enumerate(TOPICS)
    ]
    qa.append(
        {"question": f"{TOPICS[0]} and {TOPICS[1]}", "evidence": ["D1:3; D1:12"], "category": 1}
    )
    qa.append({"question": "something never said", "evidence": ["D9:9"], "category": 2})
    qa.append({"question": "anything", "adversarial_answer": "no", "category": 5})
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Ben",
            "session_1": turns,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": second,
            "session_2_date_time": "9:00 am on 10 May, 2023",
            "session_3_date_time": "9:00 am on 11 May, 2023",  # no turns: ignored
        },
        "qa": qa,
    }


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([conversation("conv-a"), conversation("conv-b")]))
    return path


def run(*arguments: str) -> Any:
    return CliRunner().invoke(main, ["eval", "locomo", *arguments], catch_exceptions=False)


def test_the_figures_follow_from_the_questions(data_file: Path) -> None:
    done = run(str(data_file), "--embedder", "hash/256", "--json", "--quiet")
    assert done.exit_code == 0, done.output
    figures = json.loads(done.output)
    assert figures["turns"] == 2 * 61 and figures["questions"] == 2 * 8
    # the hash embedder embeds words: each topic's turn is found by its words, from k=5 on
    single = figures["by_category"]["single-hop"]
    assert single["recall"] == [100.0] * 4 == single["any"] == single["all"]
    temporal = figures["by_category"]["temporal"]  # its evidence does not exist
    assert temporal["recall"] == [0.0] * 4 and temporal["any"] == [0.0] * 4
    multi = figures["by_category"]["multi-hop"]  # two evidence turns, both found
    assert multi["all"][-1] == 100.0
    assert figures["search_ms"]["p50"] > 0 and figures["dragon"] == [56.7, 66.2, 76.7, 82.7]


def test_the_table_and_the_library_agree(data_file: Path) -> None:
    done = run(str(data_file), "--embedder", "hash/256", "--quiet", "--conversations", "1")
    assert done.exit_code == 0, done.output
    assert "LoCoMo: 1 conversations, 61 turns, 8 questions" in done.output
    data = locomo.load(data_file)[:1]
    with Memory("memory://", "memory://", "hash/256", {"semantic_recall": True}) as memory:
        expected = locomo.evaluate(memory, data).rows()
    cells = " | ".join(f"{v:.1f}" for v in expected["recall"])
    assert f"| all | 8 | R | {cells} |" in done.output
    assert "| DRAGON (the paper, all ten conversations) | | R | 56.7 |" in done.output


def test_a_given_store_is_left_as_it_was(data_file: Path, tmp_path: Path) -> None:
    url = f"libsql:///{tmp_path / 'mine.db'}"
    with Memory(url, url, "hash/256", {"semantic_recall": True}) as mine:
        mine.create_thread("me", thread_id="my-thread")
    done = run(str(data_file), "--storage", url, "--embedder", "hash/256", "--quiet")
    assert done.exit_code == 0, done.output
    with Memory(url, url, "hash/256", {"semantic_recall": True}) as mine:
        assert mine.get_thread("my-thread") is not None
        assert mine.get_thread("conv-a-session-1") is None  # deleted afterwards
        assert mine.search("conv-a", "Osaka", top_k=5) == []
    kept = run(str(data_file), "--storage", url, "--embedder", "hash/256", "--quiet", "--keep")
    assert kept.exit_code == 0
    again = run(str(data_file), "--storage", url, "--embedder", "hash/256", "--quiet")
    assert again.exit_code == EXIT_FAILURE
    assert "already holds thread 'conv-a-session-1'" in again.output
    assert len(again.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "arguments", "code", "says"),
    [
        ("[]", [], EXIT_FAILURE, "expected a JSON list of conversations"),
        ("{not json", [], EXIT_FAILURE, "is not a LoCoMo JSON file"),
        ('[{"sample_id": "c", "conversation": {"speaker_a": "A"}}]', [], EXIT_FAILURE, "no qa"),
        (None, ["--options", "{bad"], EXIT_USAGE, "--options"),
        (None, ["--options", '{"semantic_recall": {"top_k": 0}}'], EXIT_USAGE, "top_k"),
        (None, ["--storage", "bogus://x"], EXIT_USAGE, "bogus"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(
    data_file: Path, tmp_path: Path, content: str | None, arguments: list[str], code: int, says: str
) -> None:
    if content is not None:
        data_file.write_text(content)
    done = run(str(data_file), "--embedder", "hash/256", "--quiet", *arguments)
    assert done.exit_code == code, done.output
    assert says in done.output and len(done.output.strip().splitlines()) == 1, done.output
    assert list(tmp_path.glob("*.db")) == []
