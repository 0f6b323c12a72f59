"""How a question is read: the words that carry it, its shape, and what kind of answer it asks for."""

from __future__ import annotations

import pytest

from memory.recall.keywords import encode_sparse_query, own_line_terms
from memory.recall.question import CONTENT_WEIGHT, ENTITY_WEIGHT, OWN_LINES_SHARE, AnswerKind, read_question


def term(word: str) -> int:
    (index,) = encode_sparse_query(word).indices
    return index


def searched(query: str, names: tuple[str, ...] = ()) -> dict[int, float]:
    keywords = read_question(query, names).keywords
    return dict(zip(keywords.indices, keywords.values, strict=True))


def carried(query: str, names: tuple[str, ...] = ()) -> set[int]:
    """The terms of the words that carry the question (their other forms aside)."""
    return set(read_question(query, names).content_terms)


def test_the_words_that_shape_a_question_are_not_searched() -> None:
    # "name", "many", "old", "called", "tell", "kind" survive the analyzer's stopwords: not here.
    assert carried("What is Mira's name?") == {term("mira")}
    assert carried("How many wolves attacked?") == {term("wolves"), term("attacked")}
    assert carried("How old is the oak?") == {term("oak")}
    assert carried("what's the tabby called") == {term("tabby")}
    assert carried("Do you know what kind of tea Ana would like") == {term("tea"), term("ana")}
    # The participants' names are in every memory: they carry nothing either.
    assert carried("What does Melanie paint?", ("Melanie", "Caroline Reed")) == {term("paint")}
    # Nothing but shaping words: nothing to search by keyword.
    assert carried("what is it called?") == set()


def test_entities_weigh_more_than_content_words() -> None:
    weights = searched("did I pay Doran the 14 silver")
    assert weights[term("doran")] == weights[term("14")] == ENTITY_WEIGHT
    assert weights[term("silver")] == weights[term("pay")] == CONTENT_WEIGHT
    # The first word of a sentence is capitalised by grammar, not because it names something.
    assert searched("Wolves attacked them")[term("wolves")] == CONTENT_WEIGHT
    # A capitalised word inside the sentence is an entity even where a lowercase one shapes it.
    assert searched("what happened in May")[term("may")] == ENTITY_WEIGHT
    assert term("may") not in searched("May I ask about the oak?")


def test_a_question_about_the_user_also_asks_their_own_lines() -> None:
    mine = read_question("Who is my sister?")
    assert mine.about_user
    own = own_line_terms({term("sister"): CONTENT_WEIGHT})
    assert searched("Who is my sister?") == {term("sister"): 1.0} | {t: OWN_LINES_SHARE for t in own}
    general = read_question("Who is Leila's sister?")
    assert not general.about_user
    assert set(general.keywords.indices) == {term("leila"), term("sister")}


@pytest.mark.parametrize(
    ("query", "gathers"),
    [
        ("What hobbies does she pursue?", True),
        ("Which shelters does he volunteer at?", True),
        ("What kinds of food do I like?", True),
        ("Have I ever been injured?", True),
        ("Tell me all the places we went", True),
        ("What is my sister's name?", False),
        ("How many wolves attacked me?", False),
        ("Where does Leila live?", False),
    ],
)
def test_a_question_asking_for_several_things_gathers(query: str, gathers: bool) -> None:
    assert read_question(query).gathers is gathers


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("When is Turnip's birthday?", AnswerKind.TIME),
        ("What dates am I in Iceland?", AnswerKind.TIME),
        ("How many wolves attacked me?", AnswerKind.AMOUNT),
        ("how much rent do I pay", AnswerKind.AMOUNT),
        ("How old is my grandmother?", AnswerKind.AMOUNT),
        ("Who adopted Clover?", AnswerKind.PERSON),
        ("Where did we find Ember?", AnswerKind.PLACE),
        ("What is my sister's name?", AnswerKind.NAME),
        ("What is my dog called?", AnswerKind.NAME),
        ("Clover", None),
    ],
)
def test_what_the_wh_phrase_asks_for(query: str, kind: AnswerKind | None) -> None:
    assert read_question(query).answer_kind is kind


def test_a_text_holds_the_kind_of_answer_asked_for() -> None:
    when = read_question("When is Biscuit's birthday?")
    assert when.holds_answer("BISCUIT IS 4!!! (well yesterday, May 12th lol)")
    assert when.holds_answer("see you on Tuesday at 5:30pm")
    assert not when.holds_answer("he stole a whole croissant off the counter")
    amount = read_question("How much was the map?")
    assert amount.holds_answer("hammer price was $165") and amount.holds_answer("forty-five dollars")
    assert not amount.holds_answer("a lovely engraved map")
    who = read_question("Who adopted Clover?", ("Noor", "Mira"))
    # A name inside a sentence, but neither a participant's nor one the question already says.
    assert who.holds_answer("Noor: a family in Didsbury adopted her today")
    assert not who.holds_answer("Noor: about 5 weeks until she's adopted\nMira: Clover is lucky")
    assert not who.holds_answer("Noor: we told Clover and Mira about it")
    assert not read_question("What is my sister's name?").holds_answer("on May 12th, 14 coins")


def test_coverage_is_the_share_of_the_content_held() -> None:
    question = read_question("how much silver do I owe Doran")
    assert question.coverage("I owe Doran 14 silver coins") == pytest.approx(1.0)
    # Doran weighs 1.5 of the 3.5 (silver, owe, Doran).
    assert question.coverage("Doran fixed my sword") == pytest.approx(1.5 / 3.5)
    assert question.coverage("tides and moons") == 0.0
    assert read_question("what is it?").coverage("anything") == 0.0


@pytest.mark.parametrize(
    ("query", "head"),
    [
        ("what's my sister's address", "address"),
        ("What is Mira's mark?", "mark"),
        ("What is the name of my dog?", "dog"),  # "the name of": the noun after "of" carries it
        ("what's my cat called", "cat"),
        ("which herb can't I stand", "herb"),
        ("what pet do I have", "pet"),
        ("How many wolves attacked me?", "wolves"),
        ("How old is my grandmother?", "grandmother"),
        ("Who is my sister?", "sister"),
        ("What kind of art does Melanie make?", "art"),
        # No noun asked about, or only the kind of answer: no head.
        ("what's happening on June 27", None),
        ("What was my 10k time?", None),
        ("Where did we find Ember?", None),
        ("How much did the Lisbon map cost?", None),
        ("Leila", None),
    ],
)
def test_the_head_is_the_noun_the_question_asks_about(query: str, head: str | None) -> None:
    found = read_question(query).head
    assert (term(head) in found) if head else not found


def test_a_text_holds_the_head_or_not() -> None:
    address = read_question("what's my sister's address")
    # The sister without the address does not answer it; the address does, even without the sister.
    assert not address.holds_head("so my sister Leila lives in Porto")
    assert address.holds_head("Leila sent me her address: Rua das Flores 88")
    assert read_question("How many wolves attacked me?").holds_head("a wolf, then two more")
    assert not read_question("what's happening on June 27").holds_head("anything at all on June 27")
