"""core/keywords.py: the words of a text, which every backend's keyword index holds."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from recallstack.core.keywords import words


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
