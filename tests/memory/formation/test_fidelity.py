"""Key facts and fidelity misses: what a memory of a text must keep, and what a summary lost."""

from __future__ import annotations

import pytest

from memory.formation.fidelity import extract_key_facts, fidelity_misses

# --- extract_key_facts ----------------------------------------------------------------------------


def test_facts_are_names_numbers_and_dates_case_folded() -> None:
    text = (
        "Alice: I moved to Paris on March 15th, 2024 with my 2 cats. The rent is 1,200 euros.\n"
        "Lilith: It's 3.5 km from the Eiffel Tower. See you Monday at 10:30!"
    )
    assert extract_key_facts(text) == {
        "paris",
        "march 15th, 2024",
        "2",
        "1,200",
        "3.5",
        "eiffel",
        "tower",
        "monday",
        "10:30",
    }


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("on 2024-03-15 we met", "2024-03-15"),
        ("on 3/15/2024 we met", "3/15/2024"),
        ("on 15 March 2024 we met", "15 march 2024"),
        ("on March 15 we met", "march 15"),
        ("in March 2024 we met", "march 2024"),
        ("on the 5th of May we met", "5th of may"),
        ("on 15.03.2024 we met", "15.03.2024"),
        ("at 10:30:00 we met", "10:30:00"),
        ("we met 42 times", "42"),
        ("we ran 5km", "5"),
        ("we paid 1,000,000 dollars", "1,000,000"),
        ("we met in München", "münchen"),
        ("we met Alice's friend", "alice"),
    ],
)
def test_extracts_each_kind_of_fact(text: str, fact: str) -> None:
    assert fact in extract_key_facts(text)


@pytest.mark.parametrize(
    "text",
    [
        "The cat sat. I think so. User said hi. Assistant said hello.",
        "User: hi\nAssistant: hello",
        "Rose is red. A rose smells sweet.",
        "<|start_header_id|>Assistant<|end_header_id|>\n\nhi",
        "see https://Example.com/Foo_Bar and <@1234567>",
        "Lol. Okay. Thanks!",
        "snake_case and v2",
    ],
)
def test_no_facts_in_common_words_labels_tokens_and_links(text: str) -> None:
    assert extract_key_facts(text) == set()


def test_a_name_opening_a_sentence_is_still_a_fact() -> None:
    assert extract_key_facts("Bob left early.") == {"bob"}
    assert extract_key_facts("We saw Rose. Rose waved.") == {"rose"}


def test_extract_key_facts_empty() -> None:
    assert extract_key_facts("") == set()


# --- fidelity_misses -----------------------------------------------------------------------------------


def test_no_misses_when_every_fact_is_kept() -> None:
    source = "Alice: I moved to Paris on March 15th with 2 cats.\nLilith: Lovely!"
    assert fidelity_misses(source, "Alice moved to Paris on March 15 with 2 cats.") == []


def test_misses_are_sorted_and_stable() -> None:
    source = "Alice: I paid 1,000 to Bob in Zurich in 2015."
    summary = "She paid money."
    assert fidelity_misses(source, summary) == ["1,000", "2015", "bob", "zurich"]
    assert fidelity_misses(source, summary) == fidelity_misses(source, summary)


def test_thousands_separators_do_not_matter() -> None:
    assert fidelity_misses("I paid 1,000 dollars", "paid 1000 dollars") == []
    assert fidelity_misses("I paid 1000 dollars", "paid 1,000 dollars") == []


def test_presence_is_whole_word_and_whole_number() -> None:
    assert fidelity_misses("I met Bob.", "I met Bobby.") == ["bob"]
    assert fidelity_misses("We met on the 15th.", "We met in 2015.") == ["15"]
    assert fidelity_misses("It was 3 days.", "It was 3.5 days.") == ["3"]
    assert fidelity_misses("I met Bob.", "I met Bob's brother.") == []


def test_presence_looks_past_an_occurrence_inside_a_longer_word_or_number() -> None:
    assert fidelity_misses("I paid 15 euros.", "Receipt 1500: paid 15.") == []
    assert fidelity_misses("Ask Ann.", "Anna and Ann came.") == []
    assert fidelity_misses("Ask Ann.", "Anna came, Joanna too.") == ["ann"]
    assert fidelity_misses("Bob's cat is 12.", "The cat of Bob is 12 years old.") == []


def test_date_spelling_variants_match() -> None:
    assert fidelity_misses("on Jan. 5th, 2024", "on jan 5 2024") == []


def test_speaker_labels_do_not_count() -> None:
    source = "Alice: I love tea.\nLilith: Me too.\nUser: ok\nAssistant: fine"
    assert fidelity_misses(source, "Someone loves tea.") == []


def test_a_speaker_named_in_the_text_does_count() -> None:
    assert fidelity_misses("Alice: hi\nLilith: Hello Alice!", "A greeting.") == ["alice"]
