"""Word forms read for one word give what lemminflect's own functions give after parsing its tables whole."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from lemminflect import config, getAllInflections, getAllLemmas

from memory.recall.word_forms import other_forms

# lemminflect's overrides and auxiliaries, a word at each end of the sorted tables, one in none.
SPECIAL = ["be", "was", "can", "could", "will", "must", "'d", "'m", "abdomen", "bless", "another", "all"]
SPECIAL += ["aachen", "zygote", "zzz", "bonsai", "wolves", "bought", "address", "grandmother"]


def forms_by_lemminflect(word: str) -> frozenset[str]:
    lemmas = {lemma for found in getAllLemmas(word).values() for lemma in found}
    inflected = {
        form for lemma in lemmas | {word} for found in getAllInflections(lemma).values() for form in found
    }
    return frozenset((lemmas | inflected) - {word})


def table_words() -> list[str]:
    words: set[str] = set()
    for table in (config.lemma_lu_fn, config.inflection_lu_fn):
        for line in gzip.decompress(Path(table).read_bytes()).decode().splitlines():
            word, _, *forms = line.split(",")
            words.add(word.lower())
            words.update(form.lower() for spellings in forms for form in spellings.split("/") if form)
    return sorted(words)


def test_the_forms_of_a_word_are_lemminflects() -> None:
    words = table_words()[::97] + SPECIAL  # ~1,000 words; all 70,000 agreed when it was written
    differing = {w: sorted(other_forms(w) ^ forms_by_lemminflect(w)) for w in words}
    assert {w: d for w, d in differing.items() if d} == {}
    assert other_forms("wolves") == {"wolf", "wolfs", "wolfed", "wolfing"}
    assert other_forms("was") >= {"be", "is", "are", "were", "been", "being"}


def test_a_head_noun_is_read_without_lemminflect_parsing_its_tables_whole() -> None:
    """Parsing both tables costs a cold recall ~0.3 s; one word's lines are all a question needs."""
    script = (
        "from lemminflect import Inflections, Lemmatizer\n"
        "from memory.recall.question import read_question\n"
        "question = read_question('How many wolves attacked me?')\n"
        # lemminflect keeps a parsed table on its singleton, in these attributes (lemminflect 0.2).
        "parsed = hasattr(Lemmatizer(), 'lemma_dict'), hasattr(Inflections(), 'infl_dict')\n"
        "print(bool(question.head), *parsed)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]
