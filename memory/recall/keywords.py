"""Keyword (sparse) vectors, so that names, dates and rare words are found even when the dense
embedding misses them; and the text a memory is keyed by on that side.

The analyzer is Qdrant Edge's own BM25 model (`qdrant_edge.Bm25`): a word tokenizer, lowercase,
ASCII folding, English stopwords and the Snowball English stemmer ("ran a marathon" and "running
marathons" share terms). Vectors are computed here, client-side, as plain (indices, values), so the
same vectors feed Qdrant Edge and a Qdrant server. Documents carry only BM25's term-frequency half;
the IDF half is applied by the index itself (the sparse vector's IDF modifier), which knows the
corpus statistics we don't.

What the user said themselves is keyed twice: with the whole exchange, and again in a space of
its own (`own_line_terms`: the same term ids with the top bit set), so that a question about the
user ("my sister", "my dog") can prefer the memories where the user said those words over those
where only the personality did, in the same single search.

Term ids belong to this analyzer: an index built by another one must be rebuilt (`personae
reindex`). KEYWORD_ENCODER names it; the index stores the name and warns when it differs.
"""

from __future__ import annotations

import re
from datetime import datetime

import qdrant_edge as edge

from memory.types import SparseVector

__all__ = [
    "KEYWORD_ENCODER",
    "encode_keywords",
    "encode_sparse",
    "encode_sparse_query",
    "keyword_text",
    "own_line_terms",
    "query_terms",
]

# Change this whenever a setting below changes the term ids or weights of stored vectors.
KEYWORD_ENCODER = "edge-bm25-en-snowball-own-lines-ordinals-2"
# The analyzer's term ids are below 2**31 (31-bit hashes); the user's own lines use the ids above.
OWN_LINES_BIT = 1 << 31

K1 = 1.2
B = 0.75
# A memory is one exchange, about this many terms once stopwords are dropped. A constant rather
# than the live corpus mean, so a document's weights never change after it is indexed.
AVG_LEN = 30.0

_MODEL = edge.Bm25(
    edge.Bm25Config(
        k=K1,
        b=B,
        avg_len=AVG_LEN,
        tokenizer=edge.TokenizerType.Word,
        language="english",
        lowercase=True,
        ascii_folding=True,
        stopwords=edge.StopwordsSet(languages={edge.Language.English}),
        stemmer=edge.SnowballParams(edge.SnowballLanguage.English),
    )
)


def _sorted(vector: edge.SparseVector) -> SparseVector:
    pairs = sorted(zip(vector.indices, vector.values, strict=True))
    return SparseVector(indices=[int(i) for i, _ in pairs], values=[float(v) for _, v in pairs])


# "May 12th" and "May 12" are the same day: an ordinal is keyed as its number.
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b", re.IGNORECASE)


def encode_sparse(text: str) -> SparseVector:
    """Encode a document as BM25 term-frequency weights (IDF is applied by the index)."""
    return _sorted(_MODEL.embed_document(_ORDINAL.sub(r"\1", text)))


def encode_sparse_query(text: str) -> SparseVector:
    """Encode a query: weight 1.0 per unique term, so a score sums the matched documents' weights."""
    return _sorted(_MODEL.embed_query(_ORDINAL.sub(r"\1", text)))


def query_terms(text: str) -> frozenset[int]:
    """The terms `encode_sparse_query` gives the text, as a set: what a test of words held reads,
    without building the sorted vector (recall asks it of every memory it reads)."""
    return frozenset(_MODEL.embed_query(_ORDINAL.sub(r"\1", text)).indices)


def own_line_terms(terms: dict[int, float]) -> dict[int, float]:
    """The same terms in the space of what the user said themselves."""
    return {term | OWN_LINES_BIT: weight for term, weight in terms.items()}


def encode_keywords(text: str, own_lines: str | None = None) -> SparseVector:
    """A memory's keyword vector: its keyword text (`keyword_text`), plus the user's own lines in
    their own space (`own_line_terms`) when known."""
    whole = encode_sparse(text)
    if not own_lines or not own_lines.strip():
        return whole
    own = encode_sparse(own_lines)
    return SparseVector(
        indices=whole.indices + [term | OWN_LINES_BIT for term in own.indices],
        values=whole.values + own.values,
    )


# English month names whatever the process locale (strftime's %B follows it).
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def keyword_text(exchange: str, *, previous: str | None = None, occurred_at: datetime | None = None) -> str:
    """What a memory is keyed by on the keyword side (its content and dense vector are unchanged):

        On 8 May 2023:
        <the message just before the exchange, `Name: text`>
        <the exchange, `Name: text` lines>

    The date, written with the month's name, lets "what did I do in May?" or "on 8 May" match it;
    the previous message lets a reply be found by what it answers ("yes, twice!" to "been to Kyoto?").
    """
    lines = []
    if occurred_at is not None:
        lines.append(f"On {spoken_date(occurred_at)}:")
    if previous and previous.strip():
        lines.append(previous.strip())
    lines.append(exchange)
    return "\n".join(lines)


def spoken_date(at: datetime) -> str:
    """`8 May 2023`, the month by its English name."""
    return f"{at.day} {_MONTHS[at.month - 1]} {at.year}"
