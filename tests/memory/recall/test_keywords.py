from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from memory.recall.keywords import encode_sparse, encode_sparse_query, keyword_text


def term(word: str) -> int:
    """The sparse dimension of one word, as the encoder computes it."""
    (index,) = encode_sparse_query(word).indices
    return index


def weights(text: str) -> dict[int, float]:
    vector = encode_sparse(text)
    return dict(zip(vector.indices, vector.values, strict=True))


def test_words_are_lowercased_folded_and_stemmed_and_stopwords_dropped() -> None:
    assert encode_sparse_query("The Café in Zürich and I").indices == sorted({term("cafe"), term("zurich")})
    # Snowball stemming: a question's "running marathons" finds "ran a marathon... runs".
    assert term("running") == term("runs") == term("run")
    assert term("marathons") == term("marathon")
    assert term("Lisbon") == term("lisbon")


def test_dates_and_numbers_are_split_into_their_parts() -> None:
    vector = encode_sparse_query("Met Ana on 2024-03-15 at 14:30")
    assert {term("2024"), term("03"), term("15"), term("14"), term("30")} <= set(vector.indices)
    assert term("ana") in vector.indices


def test_underscores_and_punctuation_separate_words() -> None:
    vector = encode_sparse_query("snake_case, hello!!! *waves*")
    assert vector.indices == sorted({term("snake"), term("case"), term("hello"), term("waves")})


def test_term_ids_are_stable_across_processes() -> None:
    # An index outlives the process that wrote it: a restart must find the same dimensions.
    code = (
        "from memory.recall.keywords import encode_sparse_query; print(encode_sparse_query('zürich').indices)"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == str([term("zürich")])
    assert term("zürich") >= 0


def test_encode_sparse_sorted_unique_indices() -> None:
    vector = encode_sparse("apple banana apple cherry apple banana")
    assert vector.indices == sorted(set(vector.indices))
    assert len(vector.indices) == 3
    assert len(vector.values) == 3


def test_encode_sparse_bm25_saturation() -> None:
    found = weights("apple banana apple cherry apple banana")
    apple, banana, cherry = (found[term(t)] for t in ("apple", "banana", "cherry"))
    assert apple > banana > cherry > 0
    # k1 + 1 bounds a saturated term weight however often it repeats.
    assert encode_sparse("apple " * 500).values[0] < 2.2
    # BM25 exact value for tf=1 in a 6-token document: tf*(k1+1)/(tf + k1*(1 - b + b*6/30)).
    assert cherry == pytest.approx(2.2 / (1 + 1.2 * (0.25 + 0.75 * 6 / 30)), rel=1e-4)


def test_encode_sparse_longer_documents_weigh_a_term_less() -> None:
    short = weights("ana lives in lisbon")
    long = weights("ana lives in lisbon " + " ".join(f"word{i}" for i in range(80)))
    assert short[term("ana")] > long[term("ana")]


def test_encode_sparse_query_unit_weights() -> None:
    vector = encode_sparse_query("Ana Ana 2024-03-15 the")
    assert vector.indices == sorted({term(t) for t in ("ana", "2024", "03", "15")})
    assert vector.values == [1.0] * 4


def test_empty_and_stopword_only_text_is_empty() -> None:
    assert encode_sparse("").indices == []
    assert encode_sparse_query("the and of").indices == []


def test_keyword_text_is_the_date_the_previous_message_and_the_exchange() -> None:
    at = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    text = keyword_text(
        "Ana: been twice!\nMira: lucky you", previous="Mira: ever been to Kyoto?", occurred_at=at
    )
    assert text.splitlines() == [
        "On 8 May 2023:",
        "Mira: ever been to Kyoto?",
        "Ana: been twice!",
        "Mira: lucky you",
    ]
    # "When did I go to Kyoto?" in May: the date and the question answered are both keywords now.
    assert {term("may"), term("2023"), term("kyoto")} <= set(encode_sparse(text).indices)
    assert keyword_text("Ana: hi", previous="  ", occurred_at=None) == "Ana: hi"
