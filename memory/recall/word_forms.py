"""A word's other forms in English (wolves: wolf; bought: buy, buying, buys), from lemminflect's
tables, read only for the words asked.

lemminflect's `getAllLemmas` and `getAllInflections` parse both of its tables whole on first use
(120,000 lines, ~0.3 s), which a cold `personae recall` would pay for one head noun. The tables are
sorted by word, each word's lines together: a word's lines are found in the decompressed text
(~20 ms once a process, then ~1 ms a word) and read by lemminflect's own codecs and overrides, so
the forms are exactly those its functions give.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class _Tables:
    lemmas: str  # lemma_lu.csv: word,category,lemma/lemma
    inflections: str  # infl_lu.csv: lemma,category,form/form,form...
    lemma_overrides: dict[str, dict[str, tuple[str, ...]]]
    inflection_overrides: dict[str, dict[str, tuple[str, ...]]]
    # can, may, will, shall, must, ought, dare, be: lemminflect replaces their table entries.
    auxiliaries: dict[str, dict[str, tuple[str, ...]]]
    # lemminflect's codecs, which read a line of each table.
    lemma_line: Any
    inflection_line: Any
    upos: Any


@cache
def _tables() -> _Tables:
    # Imported here: lemminflect brings numpy in, and only a question with a head needs it.
    from lemminflect import config
    from lemminflect.codecs.InflectionLUCodec import InflectionLUCodec
    from lemminflect.codecs.LemmaLUCodec import LemmaLUCodec
    from lemminflect.codecs.OverridesCodec import OverridesCodec
    from lemminflect.core.LexicalUtils import categoryToUPos

    def text(path: str) -> str:
        # A newline first: every line, the first too, starts after one.
        return "\n" + gzip.decompress(Path(path).read_bytes()).decode()

    return _Tables(
        lemmas=text(config.lemma_lu_fn),
        inflections=text(config.inflection_lu_fn),
        lemma_overrides=OverridesCodec.load(config.lemma_overrides_fn),
        inflection_overrides=OverridesCodec.load(config.infl_overrides_fn),
        auxiliaries=InflectionLUCodec.updateForAuxMod({}),
        lemma_line=LemmaLUCodec.fromString,
        inflection_line=InflectionLUCodec.fromString,
        upos=categoryToUPos,
    )


def _lines(table: str, word: str) -> list[str]:
    """The table's lines for `word`, in the table's order."""
    key = f"\n{word},"
    lines = []
    start = table.find(key)
    while start >= 0:
        end = table.find("\n", start + 1)
        lines.append(table[start + 1 : end if end >= 0 else len(table)])
        start = end if table.startswith(key, end) else -1
    return lines


def lemmas(word: str) -> set[str]:
    """What lemminflect's `getAllLemmas(word)` gives, every part of speech together, lowercased."""
    tables = _tables()
    word = word.lower()
    by_upos: dict[str, tuple[str, ...]] = {}
    for line in _lines(tables.lemmas, word):
        _, category, forms = tables.lemma_line(line)
        by_upos[tables.upos(category)] = forms  # a later line of a part of speech replaces it
    by_upos.update(tables.lemma_overrides.get(word, {}))
    return {form.lower() for forms in by_upos.values() for form in forms}


def inflections(lemma: str) -> set[str]:
    """What lemminflect's `getAllInflections(lemma)` gives, every tag together, lowercased."""
    tables = _tables()
    lemma = lemma.lower()
    by_tag: dict[str, tuple[str, ...]] = {}
    for line in _lines(tables.inflections, lemma):
        by_tag.update(tables.inflection_line(line)[2])
    if lemma in tables.auxiliaries:
        by_tag = dict(tables.auxiliaries[lemma])
    by_tag.update(tables.inflection_overrides.get(lemma, {}))
    return {form.lower() for forms in by_tag.values() for form in forms}


@lru_cache(maxsize=4096)
def other_forms(word: str) -> frozenset[str]:
    """The word's lemmas and all their inflections (bought: buy, buys, buying), the word itself not."""
    found = lemmas(word)
    found |= {form for lemma in found | {word.lower()} for form in inflections(lemma)}
    return frozenset(found - {word.lower()})
