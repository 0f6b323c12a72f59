"""An audit of stored memories against the transcript they were formed from, whatever wrote them.

Each memory is read against the lines it was made of (its source message ids) and every other line of
the transcript, and each defect a real model showed (issue 30) is counted:

- other_content: a distinctive word (at least 4 letters, rarer than "shared") that the memory's own
  exchange never says but another exchange does: another exchange's or another user's content;
- owner: the memory is filed under someone who did not say its user lines;
- cut: the model's text does not end a sentence (stopped at max_tokens, or lost its end);
- formatting: *actions*, emoji, repeated marks, prompt tags (`<context>`, `[1]`) or chat-template
  tokens left in the memory;
- invented: a name, number, date or time that the exchange does not hold;
- stated_question: a sentence that asks nothing and reports no speech, repeating three words in a row
  of what a question of its exchange asked (not a clause it states) that no statement of it says;
- unsaid: a sentence with three distinctive words or more that nobody in the transcript said and no
  word of its own exchange (an event added with no name or number: the fact checks cannot see it).

Used by the real-model test tier and `bench.summaries --real`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.formation.attribution import SPEECH_VERBS, asked_part
from memory.formation.fidelity import foreign_facts, vocabulary, word_stem, zipf

KINDS = ("other_content", "owner", "cut", "formatting", "invented", "stated_question", "unsaid")
# As memory.formation.summarizer judges another user's word: long enough, and not everyday.
DISTINCTIVE_MIN_CHARS = 4
DISTINCTIVE_MAX_ZIPF = 5.0
_WORD_RE = re.compile(r"[^\W\d_](?:\w|['’-](?=[^\W\d_]))*")
_FORMATTING_RE = re.compile(
    r"\*[^*\n]+\*|[!?]{2,}|</?\s*(?:exchange|context)\b|<\|[^|>]*\|>|^\s*\[\d+\]|\[/?INST\]|<start_of_turn>",
    re.IGNORECASE | re.MULTILINE,
)
# Words saying a sentence reports a question or speech, not a fact.
_NOT_STATED = SPEECH_VERBS | {"whether", "if", "wants", "wanted", "curious", "question", "seeks", "seeking"}
_ASKING = frozenset(
    [
        "did",
        "do",
        "does",
        "is",
        "are",
        "was",
        "were",
        "can",
        "could",
        "will",
        "would",
        "should",
        "how",
        "what",
        "when",
        "where",
        "why",
    ]
)
_CLAUSE_RE = re.compile(r"[,;:]|\s[–—-]\s")
_SENTENCE_RE = re.compile(r"[^.!?…\n]+[.!?…]*")
_UNITS = "°℃℉№©®™"  # symbols that are part of what was said, not decoration
_SENTENCE_END = tuple(".!?…") + tuple(f"{m}{q}" for m in ".!?…" for q in "\"'”’)")


@dataclass(frozen=True, slots=True)
class Line:
    """One transcript line: who said it (`user_id` None for the personality)."""

    id: str
    author: str
    user_id: str | None
    content: str


@dataclass(frozen=True, slots=True)
class StoredMemory:
    user_id: str
    content: str
    summarizer: str
    source_message_ids: tuple[str, ...]


@dataclass(slots=True)
class Audit:
    """What was found: counts by kind, and one line per finding to show."""

    memories: int = 0
    by_model: int = 0  # memories whose text the model wrote
    counts: Counter[str] = field(default_factory=Counter)
    findings: list[str] = field(default_factory=list)

    @property
    def wrong(self) -> int:
        return len({f.split(":", 1)[0] for f in self.findings})


def read_transcript(path: Path, personality: str) -> dict[str, Line]:
    """The lines of a Personae JSONL transcript by id."""
    raw = path.read_text(encoding="utf-8").splitlines()
    return transcript_lines([json.loads(line) for line in raw if line.strip()], personality)


def transcript_lines(entries: Iterable[dict[str, Any]], personality: str) -> dict[str, Line]:
    """Transcript records (as `personae import` reads them) by id."""
    lines: dict[str, Line] = {}
    for entry in entries:
        user = entry.get("role") == "user"
        author = entry.get("author") or (entry.get("user_id", "User") if user else personality)
        lines[str(entry["id"])] = Line(
            str(entry["id"]), author, entry.get("user_id") if user else None, entry["content"]
        )
    return lines


def has_formatting(text: str) -> bool:
    """Roleplay formatting, emoji, repeated marks, prompt tags or template tokens in `text`."""
    if _FORMATTING_RE.search(text):
        return True
    return any(
        (unicodedata.category(c) == "So" and c not in _UNITS) or 0x1F000 <= ord(c) <= 0x1FAFF for c in text
    )


def is_cut(text: str) -> bool:
    """Whether the text stops without ending its sentence."""
    return not text.rstrip().endswith(_SENTENCE_END)


def distinctive_stems(text: str) -> set[str]:
    """The stems of the words of `text` that name something (not everyday words)."""
    stems = set()
    for word in _WORD_RE.findall(text):
        stem = word_stem(word)
        # A number word ("eleven", "sixth") is a number, checked as one by `invented`.
        if (
            len(stem) >= DISTINCTIVE_MIN_CHARS
            and zipf(stem) < DISTINCTIVE_MAX_ZIPF
            and not vocabulary(word).numbers
        ):
            stems.add(stem)
    return stems


def _stems(text: str) -> list[str]:
    return [word_stem(word) for word in re.findall(r"[^\W_]+(?:['’][^\W\d_]+)?", text)]


def _runs(stems: list[str]) -> set[tuple[str, ...]]:
    return {
        tuple(stems[i : i + 3])
        for i in range(len(stems) - 2)
        if sum(s[0].isdigit() or (len(s) >= 3 and zipf(s) < 6.0) for s in stems[i : i + 3]) >= 2
    }


def states_a_question(sentence: str, own: Sequence[Line]) -> bool:
    """Whether a sentence that asks nothing and reports no speech repeats three words in a row of what
    a question of its exchange asked (`asked_part`), words no statement of the exchange says."""
    stems = _stems(sentence.casefold())
    if "?" in sentence or not stems or set(stems) & {word_stem(w) for w in _NOT_STATED}:
        return False
    if stems[0] in _ASKING:
        return False  # "Did the ferns survive." still asks
    asked: set[tuple[str, ...]] = set()
    stated: set[tuple[str, ...]] = set()
    for line in own:
        for said in _SENTENCE_RE.findall(line.content.casefold()):
            statement, question = asked_part(said)
            asked |= _runs(_stems(question))
            stated |= _runs(_stems(statement))
    return bool(_runs(stems) & (asked - stated))


def tells_unsaid(
    sentence: str, own_words: AbstractSet[str], said_anywhere: AbstractSet[str], speakers: Sequence[str]
) -> bool:
    """Whether a sentence tells what nobody said: three distinctive words or more that no line of the
    transcript holds, and no word (of four letters or more) of its own exchange."""
    names = {word_stem(w) for speaker in speakers for w in speaker.split()}
    words = {s.removesuffix("'s") for s in _stems(sentence) if len(s) >= 4} - names
    if words & own_words:
        return False
    unsaid = distinctive_stems(sentence) - said_anywhere - names - {word_stem(w) for w in SPEECH_VERBS}
    return len(unsaid) >= 3


def audit_memories(memories: Iterable[StoredMemory], lines: dict[str, Line], *, model: str | None) -> Audit:
    """Every memory read against its own lines and every other line (see the module docstring)."""
    audit = Audit()
    said_anywhere = {s for line in lines.values() for s in vocabulary(line.content).words}
    for number, memory in enumerate(memories, start=1):
        audit.memories += 1
        own = [lines[i] for i in memory.source_message_ids if i in lines]
        own_text = "\n".join(f"{line.author}: {line.content}" for line in own)
        own_words = vocabulary(own_text).words
        label = f"memory {number} ({', '.join(memory.source_message_ids)})"
        found: list[tuple[str, str]] = []
        elsewhere = {
            stem
            for line in lines.values()
            if line.id not in memory.source_message_ids
            for stem in distinctive_stems(line.content)
        }
        leaked = sorted(s for s in distinctive_stems(memory.content) if s in elsewhere and s not in own_words)
        if leaked:
            found.append(("other_content", ", ".join(leaked)))
        authors = {line.user_id for line in own if line.user_id is not None}
        if authors and authors != {memory.user_id}:
            found.append(("owner", f"filed under {memory.user_id}, said by {sorted(authors)}"))
        written_by_model = model is not None and memory.summarizer == model
        if written_by_model:
            audit.by_model += 1
            if is_cut(memory.content.splitlines()[0] if memory.content else ""):
                found.append(("cut", "no sentence end"))
        if has_formatting(memory.content):
            found.append(("formatting", "formatting or a prompt tag"))
        speakers = sorted({line.author for line in own})
        invented = foreign_facts(memory.content, vocabulary(own_text), names=speakers)
        if invented:
            found.append(("invented", ", ".join(invented)))
        for sentence in _SENTENCE_RE.findall(memory.content):
            if states_a_question(sentence, own):
                found.append(("stated_question", sentence.strip()))
            elif tells_unsaid(sentence, own_words, said_anywhere, speakers):
                found.append(("unsaid", sentence.strip()))
        for kind, detail in found:
            audit.counts[kind] += 1
            audit.findings.append(f"{label}: {kind} ({detail}) in {memory.content!r}")
    return audit


def stored_memories(rows: Sequence[Any]) -> list[StoredMemory]:
    """`Memory` rows as the audit reads them."""
    return [StoredMemory(r.user_id, r.content, r.summarizer, tuple(r.source_message_ids)) for r in rows]
