from __future__ import annotations

import subprocess
import sys

import pytest

from memory.recall.keywords import encode_sparse, encode_sparse_query, term_index, tokenize


def test_tokenize_lowercases_unicode_words_and_drops_stopwords() -> None:
    assert tokenize("The Café in Zürich and I") == ["café", "zürich"]


def test_tokenize_keeps_dates_and_numbers_whole_and_split() -> None:
    tokens = tokenize("Met Ana on 2024-03-15 at 14:30, paid 3.50")
    assert tokens == [
        "met",
        "ana",
        "2024-03-15",
        "2024",
        "03",
        "15",
        "14:30",
        "14",
        "30",
        "paid",
        "3.50",
        "3",
        "50",
    ]


def test_tokenize_splits_on_underscores_and_punctuation() -> None:
    assert tokenize("snake_case, hello!!! *waves*") == ["snake", "case", "hello", "waves"]


def test_term_index_is_stable_across_processes() -> None:
    # Python's hash() is salted per process; the index must not be, or a restart breaks every search.
    code = "from memory.recall.keywords import term_index; print(term_index('zürich'))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(other.stdout) == term_index("zürich")
    assert 0 <= term_index("zürich") <= 0x7FFFFFFF


def test_encode_sparse_sorted_unique_indices() -> None:
    vector = encode_sparse("apple banana apple cherry apple banana")
    assert vector.indices == sorted(set(vector.indices))
    assert len(vector.indices) == 3
    assert len(vector.values) == 3


def test_encode_sparse_bm25_saturation() -> None:
    vector = encode_sparse("apple banana apple cherry apple banana")
    weights = dict(zip(vector.indices, vector.values, strict=True))
    apple, banana, cherry = (weights[term_index(t)] for t in ("apple", "banana", "cherry"))
    assert apple > banana > cherry > 0
    # k1 + 1 bounds a saturated term weight however often it repeats.
    assert encode_sparse("apple " * 500).values[0] < 2.2
    # BM25 exact value for tf=1 in a 6-token document: tf*(k1+1)/(tf + k1*(1 - b + b*6/40)).
    assert cherry == pytest.approx(2.2 / (1 + 1.2 * (0.25 + 0.75 * 6 / 40)))


def test_encode_sparse_longer_documents_weigh_a_term_less() -> None:
    short = encode_sparse("ana lives in lisbon")
    long = encode_sparse("ana lives in lisbon " + " ".join(f"word{i}" for i in range(80)))
    ana = term_index("ana")
    assert (
        dict(zip(short.indices, short.values, strict=True))[ana]
        > dict(zip(long.indices, long.values, strict=True))[ana]
    )


def test_encode_sparse_query_unit_weights() -> None:
    vector = encode_sparse_query("Ana Ana 2024-03-15 the")
    assert vector.indices == sorted({term_index(t) for t in ("ana", "2024-03-15", "2024", "03", "15")})
    assert vector.values == [1.0] * 5


def test_empty_and_stopword_only_text_is_empty() -> None:
    assert encode_sparse("").indices == []
    assert encode_sparse_query("the and of").indices == []
