"""Key facts and the two checks: what a memory of a text must keep, and what a summary may not add."""

from __future__ import annotations

import pytest

from memory.formation.fidelity import extract_key_facts, fidelity_misses, foreign_facts, key_facts, vocabulary

# --- extract_key_facts ----------------------------------------------------------------------------


def test_facts_are_names_numbers_dates_and_times() -> None:
    text = (
        "Alice: I moved to Paris on March 15th, 2024 with my 2 cats. The rent is 1,200 euros.\n"
        "Lilith: It's 3.5 km from the Eiffel Tower. See you Monday at 10:30!"
    )
    assert extract_key_facts(text) == {
        "paris",
        "march",
        "15",
        "2024",
        "2",
        "1200",
        "3.5",
        "eiffel tower",
        "monday",
        "10:30",
    }


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("on 2024-03-15 we met", {"2024", "march", "15"}),
        ("on 3/15/2024 we met", {"3", "15", "2024"}),
        ("on 15 March 2024 we met", {"15", "march", "2024"}),
        ("on the 5th of May we met", {"5", "may"}),
        ("at 10:30:00 we met", {"10:30:00"}),
        ("at 09:05 we met", {"9:05"}),
        ("we met 42 times", {"42"}),
        ("we ran 5km", {"5"}),
        ("we paid £1,000,000", {"1000000"}),
        ("twenty-two people, ninety years, a sixth birthday", {"22", "90", "6"}),
        ("we met in München", {"münchen"}),
        ("we met Alice's friend", {"alice"}),
        ("I read Becoming Nicole by Amy Ellis Nutt", {"becoming nicole", "amy ellis nutt"}),
        ("she works at the Bank of America", {"bank of america"}),
        ("I support LGBTQ rights", {"lgbtq"}),
        ("see you on sunday", {"sunday"}),
    ],
)
def test_extracts_each_kind_of_fact(text: str, facts: set[str]) -> None:
    assert extract_key_facts(text) == facts


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
        # Sentence openers the old check took for names (issue 18's misses).
        "Seeing you happy is great. Starting today. Wishing you luck. They've left.",
        "Pick one bed. Cover the rest. Start them indoors. Send her a photo. Water deeply.",
        "Talking helps. Honestly, it does. Apparently so. Congrats!",
        "I GOT AN ALLOTMENT AND IT IS AMAZING",
        "May I ask? I may go. We march on.",
        "wait a second, one of them is here",
    ],
)
def test_no_facts_in_openers_common_words_labels_tokens_and_links(text: str) -> None:
    assert extract_key_facts(text) == set()


def test_a_name_opening_a_sentence_is_a_fact_when_rare_or_named_elsewhere() -> None:
    assert extract_key_facts("Priya dug the bed.") == {"priya"}
    assert extract_key_facts("We saw Rose. Rose waved.") == {"rose"}
    assert extract_key_facts("Bob left early.") == set()  # "bob" is a common word...
    assert key_facts("Bob left early.", names=["Bob"]).keys() == {"bob"}  # ...unless a speaker


def test_a_speaker_label_names_without_being_a_fact() -> None:
    assert extract_key_facts("Caroline: hi\nMelanie: Caroline, welcome back!") == {"caroline"}


def test_extract_key_facts_empty() -> None:
    assert extract_key_facts("") == set()


# --- fidelity_misses -----------------------------------------------------------------------------------


def test_no_misses_when_every_fact_is_kept() -> None:
    source = "Alice: I moved to Paris on March 15th with 2 cats.\nLilith: Lovely!"
    assert fidelity_misses(source, "Alice moved to Paris on March 15 with two cats.") == []


def test_misses_are_sorted_and_stable() -> None:
    source = "Alice: I paid 1,000 to Bob in Zurich in 2015."
    summary = "She paid money."
    assert fidelity_misses(source, summary) == ["1000", "2015", "bob", "zurich"]
    assert fidelity_misses(source, summary) == fidelity_misses(source, summary)


def test_number_spellings_do_not_matter() -> None:
    assert fidelity_misses("I paid 1,000 dollars", "paid 1000 dollars") == []
    assert fidelity_misses("Ninety years, twenty-two people", "90 years and 22 people") == []
    assert fidelity_misses("She turned 90.", "She turned ninety.") == []
    assert fidelity_misses("on 2024-03-15", "on March 15, 2024") == []


def test_presence_is_whole_word_and_whole_number() -> None:
    assert fidelity_misses("I met Bobby.", "I met Bob.") == ["bobby"]
    assert fidelity_misses("We met on the 15th.", "We met in 2015.") == ["15"]
    assert fidelity_misses("It was 3 days.", "It was 3.5 days.") == ["3"]
    assert fidelity_misses("I met Bobby.", "I met Bobby's brother.") == []


def test_a_name_is_kept_by_the_words_that_identify_it() -> None:
    source = "Alice: my allotment is at Hollybrook Community Gardens, with San Marzanos."
    assert fidelity_misses(source, "Alice has an allotment at Hollybrook with San Marzano tomatoes.") == []
    assert fidelity_misses(source, "Alice has an allotment with tomatoes.") == [
        "hollybrook community gardens",
        "san marzanos",
    ]


def test_speaker_labels_do_not_count() -> None:
    source = "Alice: I love tea.\nLilith: Me too.\nUser: ok\nAssistant: fine"
    assert fidelity_misses(source, "Someone loves tea.") == []


def test_a_speaker_named_in_the_text_does_count() -> None:
    assert fidelity_misses("Alice: hi\nLilith: Hello Alice!", "A greeting.") == ["alice"]


# --- foreign_facts --------------------------------------------------------------------------------------


def test_facts_the_allowed_text_does_not_hold_are_foreign() -> None:
    allowed = vocabulary("Bob: I ran the Riverside 10k in 58:41!\nSage: Under the hour, Bob!")
    assert foreign_facts("Bob ran the Riverside 10k in 58:41.", allowed) == []
    assert foreign_facts("Bob's bank PIN is 1111. Mallory ran with him on 12 March.", allowed) == [
        "1111",
        "12",
        "mallory",
        "march",
        "pin",  # an acronym
    ]


def test_openers_of_a_summary_are_not_taken_for_invented_names() -> None:
    allowed = vocabulary("Alice: my horse Thistle is 12\nSage: A fine age, Alice.")
    summary = "Additionally, Alice said her horse Thistle is twelve. Consequently Sage was glad."
    assert foreign_facts(summary, allowed, names=["Alice", "Sage"]) == []
