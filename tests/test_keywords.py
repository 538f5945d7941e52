"""core/keywords.py: the words of a text, which every backend's keyword index holds."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallstack.adapters.memory.storage import InMemoryStorage
from recallstack.core.keywords import query_terms, words
from recallstack.core.messages import Message
from recallstack.core.records import Thread


def test_words_are_folded_runs_of_letters_and_digits() -> None:
    assert words("Café in São Paulo, 2024: naïve_ideas") == [
        "cafe",
        "in",
        "sao",
        "paulo",
        "2024",
        "naive",
        "ideas",
    ]


@given(st.text(alphabet=string.printable))
def test_ascii_text_takes_the_short_way_to_the_same_words(text: str) -> None:
    """An ASCII text skips the folding; one letter more outside ASCII takes it."""
    assert words(f"{text} Ü") == [*words(text), "u"]


def test_a_query_leaves_its_stop_words_out_unless_it_has_no_other() -> None:
    assert query_terms("What is my cat called? My cat!") == ["cat", "called"]
    assert query_terms("Who is it?") == ["who", "is", "it"]
    assert query_terms("") == []


def test_stop_words_no_longer_let_a_message_outrank_the_one_a_query_is_about() -> None:
    """Through a storage: the keyword signal no longer finds the tax form for "is"."""
    storage = InMemoryStorage()
    storage.save_thread(Thread(id="t", resource_id="ada"))
    storage.save_messages(
        [
            Message(id="a", thread_id="t", role="user", content="I adopted a kitten, Miso"),
            Message(id="b", thread_id="t", role="user", content="The tax form is due"),
            Message(id="c", thread_id="t", role="user", content="Miso is a cat"),
        ]
    )
    assert storage.search_words("what is my cat called?", resource_id="ada") == [
        ("c", pytest.approx(storage.search_words("cat", resource_id="ada")[0][1]))
    ]
