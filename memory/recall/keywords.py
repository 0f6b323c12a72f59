"""BM25-style sparse keyword vectors, so that names, dates and rare words are found even when the
dense embedding misses them.

Documents carry only the term-frequency half of BM25; the IDF half is applied by the index itself
(Qdrant's sparse `Modifier.IDF`, supported by both Qdrant Edge and the server), which knows the
corpus statistics we don't.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from hashlib import blake2b

from memory.types import SparseVector

__all__ = ["STOPWORDS", "encode_sparse", "encode_sparse_query", "term_index", "tokenize"]

K1 = 1.2
B = 0.75
# Memories are a sentence or a short paragraph; a real corpus average would change every score
# whenever one memory is added, so a representative constant is used instead.
AVG_LEN = 40.0

# Deliberately tiny: dropping words that carry no recall signal, never words that could be a name.
# fmt: off
STOPWORDS: frozenset[str] = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "he", "her", "him", "his", "i", "if", "in", "into", "is", "it", "its", "me", "my",
    "of", "on", "or", "our", "s", "she", "so", "t", "than", "that", "the", "their", "them", "then", "there",
    "they", "this", "to", "was", "we", "were", "what", "when", "which", "who", "will", "with", "you",
    "your",
})
# fmt: on

# Numbers joined by - / . : (2024-03-15, 15/03/2024, 3.14, 14:30) are one token *and* their parts, so
# a query for "2024-03-15" matches exactly while "March 2024" still shares the year.
_COMPOUND_NUMBER = r"\d+(?:[-/.:]\d+)+"
# Letters and digits only: underscores and punctuation separate words.
_WORD = r"[^\W_]+"
_TOKEN = re.compile(f"{_COMPOUND_NUMBER}|{_WORD}")
_DIGITS = re.compile(r"\d+")


def tokenize(text: str) -> list[str]:
    """Split text into lowercase unicode word tokens, without stopwords, number compounds also split."""
    # NFKC folds full-width digits and ligatures; casefold is the unicode-correct lowercase (ß -> ss).
    normalized = unicodedata.normalize("NFKC", text).casefold()
    tokens: list[str] = []
    for match in _TOKEN.finditer(normalized):
        token = match.group()
        if token in STOPWORDS:
            continue
        tokens.append(token)
        if not token.isalnum():
            tokens.extend(_DIGITS.findall(token))
    return tokens


def term_index(token: str) -> int:
    """The sparse dimension of a token: stable across processes and Python versions, unlike hash()."""
    digest = blake2b(token.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def _term_counts(text: str) -> tuple[Counter[int], int]:
    tokens = tokenize(text)
    # Two tokens hashing to one index (rare at 2^31) simply share that dimension.
    return Counter(term_index(t) for t in tokens), len(tokens)


def encode_sparse(text: str) -> SparseVector:
    """Encode a document as BM25 term-frequency weights (IDF is applied by the index)."""
    counts, length = _term_counts(text)
    norm = K1 * (1.0 - B + B * length / AVG_LEN)
    indices = sorted(counts)
    values = [counts[i] * (K1 + 1.0) / (counts[i] + norm) for i in indices]
    return SparseVector(indices=indices, values=values)


def encode_sparse_query(text: str) -> SparseVector:
    """Encode a query: weight 1.0 per unique term, so a score sums the matched documents' weights."""
    counts, _ = _term_counts(text)
    indices = sorted(counts)
    return SparseVector(indices=indices, values=[1.0] * len(indices))
