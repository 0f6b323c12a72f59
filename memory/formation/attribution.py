"""Who said what: a summary's sentences checked against the speakers of its exchange (pure, no I/O).

The fact checks (memory.formation.fidelity) see names, numbers, dates and times; this one sees who a
summary gives each content phrase to. Three ways a summary goes wrong that way:

- **swapped**: a sentence gives a speaker what the other one said of themselves ("Caroline had been
  married for 5 years" when Caroline asked Melanie how long *she* had been married). Each sentence
  of the exchange has an owner: its speaker when it speaks in the first person ("I ran a race"),
  the one addressed when in the second ("how long have you been married?"), nobody otherwise. A
  summary sentence's subject (the speaker names it opens with, or "she"/"he" after one) must own
  at least one of the content words it took from the exchange; after a verb of speech ("Caroline
  asked...", "Bob told Sage...") saying it is enough.
- **question**: a sentence states as a fact what was only asked ("The ferns survived fifteen small
  dinosaurs." from "did the ferns survive fifteen small dinosaurs?"): most of its content words
  come from questions and from no statement.
- **others' claim**: a sentence made of another user's words (quoted context of a shared channel)
  more than of the exchange's own, whatever those words are ("Bob is a bad man who hits his wife",
  said by Alice, never reaches Bob's memory).
- **unsaid event**: a sentence with content words, none of them its exchange's ("Alice and Sage went
  camping by the lake with their cousins."): an event nobody said, which the fact checks cannot see
  when it carries no name or number but the speakers'.

A question is also stated when a sentence repeats, in order, three words or more of a question that
no statement of the exchange holds ("Sage water a bonsai." from "how often do you water a bonsai?"),
even where the reply speaks of the same things.

A sentence whose subject or owners cannot be told is counted as `unchecked`, never passed as
checked. Content words are the words rarer than everyday function words (`wordfreq`, in English or
the exchange's language), compared by a short prefix so "married" meets "marriage".
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from text_to_num import alpha2digit

from memory.formation.cleaning import speaker_label, strip_chat_template_tokens
from memory.formation.extractive import split_sentences
from memory.formation.words import language, possessive_dropped, verb_base, word_stem, zipf

# A word at least this frequent (zipf, in English or the exchange's language) is a function word.
FUNCTION_ZIPF = 6.0
# Words compared by their first ROOT_CHARS letters (after a plural's `s`): "married" and "marriage".
ROOT_CHARS = 5
# A sentence is a stated question, or another user's claim, from this many content words up.
MIN_EVIDENCE = 2
# A sentence repeating this many words in a row of a question (and of no statement) states it.
QUESTION_RUN = 3
# A sentence with this many content words and none of its exchange's tells an event nobody said. Two
# are often a fair paraphrase ("Jon expressed gratitude for Gina's support."); three rarely are
# (bench.attribution: 2 of 353 correct LoCoMo observations, both beyond their two turns).
UNSAID_EVENT = 3
# A subject must own at least this share of the content words a sentence took from the exchange.
OWNED_SHARE = 0.5

_CLAUSE_RE = re.compile(r"[,;:]|\s[–—-]\s")
_ROLE_NOTE_RE = re.compile(r"\s*\((?:another user|answering another user)\)\s*$")
_TOKEN_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+(?:[.,:]\d+)*")
_FIRST_PERSON_TEXT = "i i'm i've i'll i'd me my mine myself we we're we've we'll us our ours"
_FIRST_PERSON = frozenset(_FIRST_PERSON_TEXT.split())
_SECOND_PERSON_TEXT = "you you're you've you'll you'd your yours yourself yourselves u ur"
# "Thanks for driving me": a thank-you is said to someone, of what they did (in its own clause).
_THANKS = frozenset({"thanks", "thank"})
_SECOND_PERSON = frozenset(_SECOND_PERSON_TEXT.split()) | _THANKS
_PRONOUNS = frozenset({"she", "he", "they", "her", "his", "their", "them", "him", "it", "its"})
_JOINERS = frozenset({"and", "&", "both"})
# Verbs of speech: "Caroline asked Melanie ..." is true when Caroline said it, whoever it is about.
_SPEECH_TEXT = """told tells tell said says say shared shares mentioned mentions explained explains asked
    asks wondered wonders suggested suggests recommended recommends advised advises encouraged
    encourages replied replies answered answers responded responds noted notes added adds admitted
    admits confided confides revealed reveals described describes discussed discusses talked talks
    expressed expresses agreed agrees offered offers promised promises warned warns reminded reminds
    congratulated congratulates praised praises complimented compliments thanked thanks greeted
    greets welcomed welcomes joked jokes commented comments remarked remarks stated states reported
    reports announced announces informed informs updated updates confirmed confirms inquired
    inquires chatted chats spoke speaks wished wishes hoped hopes acknowledged acknowledges
    apologized apologizes apologised apologises reassured reassures"""
_SPEECH = frozenset(_SPEECH_TEXT.split())
# A summary sentence that says something was asked, wished or wondered states no fact.
_NOT_ASSERTED = _SPEECH | {
    "whether", "if", "wants", "wanted", "curious", "question", "questions", "seeks", "seeking", "sought",
}  # fmt: skip
# What a sentence reporting speech says it with (testkit.summary_audit reads summaries alike).
SPEECH_VERBS = _SPEECH
# A sentence opening with one of these asks (a model may end it with a full stop): it states nothing.
_INTERROGATIVE_TEXT = """did does do is are was were has have had can could will would should shall may
    might how what when where why who whom whose which"""
_INTERROGATIVE = frozenset(_INTERROGATIVE_TEXT.split())
# Frequent enough to say nothing of who did what, though rarer than FUNCTION_ZIPF.
_FILLER = _SPEECH | {"really", "going", "years", "year", "also", "user", "assistant"}


class Spoken(Protocol):
    """A line of context as the summarizer quotes it (memory.formation.summarizer.Quoted)."""

    @property
    def speaker(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def other(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Line:
    speaker: str
    text: str
    other: bool = False  # another user's line, or a reply to one: not the exchange's own


@dataclass(frozen=True, slots=True)
class Attribution:
    """What a summary gets wrong about who said what (see the module docstring)."""

    swapped: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    others_claims: list[str] = field(default_factory=list)
    unsaid: list[str] = field(default_factory=list)  # events nobody said
    unchecked: int = 0  # sentences whose subject or owners could not be told
    checked: int = 0  # sentences whose subject was checked against the owners of their words

    @property
    def wrong(self) -> bool:
        return bool(self.swapped or self.questions or self.others_claims or self.unsaid)

    def detail(self) -> str:
        """One line for a report: the first wrong sentence of each kind."""
        parts = []
        for kind, found in (("swapped", self.swapped), ("question", self.questions)):
            if found:
                parts.append(f"{kind}: {found[0]!r}")
        if self.others_claims:
            parts.append(f"another user's: {self.others_claims[0]!r}")
        if self.unsaid:
            parts.append(f"nobody said: {self.unsaid[0]!r}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class _Sentence:
    speaker: str
    roots: frozenset[str]
    owners: frozenset[str]
    weak: frozenset[str]  # owners when no sentence holding the word has any
    question: bool
    other: bool


def exchange_lines(text: str, context: Iterable[Spoken] = ()) -> list[Line]:
    """An exchange's `Name: text` lines (a line without a label goes on its speaker's message), then
    its quoted context, as Lines."""
    lines = [Line(_speaker(q.speaker), q.text, q.other) for q in context if q.speaker]
    speaker = ""
    for raw in strip_chat_template_tokens(text).splitlines():
        label = speaker_label(raw.strip())
        if label is not None:
            speaker = _speaker(label.group(1))
            raw = raw.strip()[label.end() :]
        if raw.strip():
            lines.append(Line(speaker, raw.strip()))
    return lines


def check_attribution(summary: str, lines: Sequence[Line]) -> Attribution:
    """Check each sentence of `summary` against who said what in `lines` (see the module docstring)."""
    own_speakers = [line.speaker for line in lines if not line.other and line.speaker]
    names = {_name_key(s): s for line in lines if line.speaker for s in [line.speaker]}
    lang = language("\n".join(line.text for line in lines))
    sentences = _said(lines, list(dict.fromkeys(own_speakers)), lang)
    own_roots = {r for s in sentences if not s.other for r in s.roots}
    other_roots = {r for s in sentences if s.other for r in s.roots}
    swapped: list[str] = []
    questions: list[str] = []
    others: list[str] = []
    unsaid: list[str] = []
    asked_runs = _question_runs(lines)
    unchecked = checked = 0
    previous: frozenset[str] = frozenset()
    for text, _ in split_sentences(strip_chat_template_tokens(summary)):
        words = _tokens(text)
        subjects, speech = _subjects(words, names, previous)
        previous = subjects or previous
        roots = {_root(w) for w in words if _is_content(w, names, lang)}
        theirs = (roots & other_roots) - own_roots
        if len(theirs) >= MIN_EVIDENCE and len(theirs) > len(roots & own_roots):
            others.append(text)
            continue
        found = roots & own_roots
        if not found:
            # A speaker's name with its 's is no content ("Gina's support").
            owned_names = {_root(w) for w in words if w.casefold().removesuffix("'s") in names}
            if len(roots - other_roots - owned_names) >= UNSAID_EVENT:
                unsaid.append(text)
            continue
        if _stated_question(text, words, found, sentences) or _repeats_question(text, words, asked_runs):
            questions.append(text)
            continue
        owned = [s for s in sentences if not s.other and s.roots & found]
        if not subjects or not any(s.owners or s.weak for s in owned):
            unchecked += 1
            continue
        checked += 1
        if speech:
            # "Caroline asked why Melanie ran a race": saying it, or being named in what was said.
            named = subjects | {names[n] for w in words if (n := _named(w)) in names}
            if not any(s.speaker in named or s.owners & named for s in owned):
                swapped.append(text)
        elif any(_support(subject, found, owned) < OWNED_SHARE for subject in subjects):
            swapped.append(text)
    return Attribution(swapped, questions, others, unsaid, unchecked, checked)


def _support(subject: str, found: set[str], owned: list[_Sentence]) -> float:
    """The share of a sentence's content words that `subject` owns: a word's owners are those of
    the exchange's sentences holding it, or their weak owners when those have none."""
    held = mine = 0
    for root in found:
        holding = [s for s in owned if root in s.roots]
        owners = {o for s in holding for o in s.owners} or {o for s in holding for o in s.weak}
        if owners:
            held += 1
            mine += subject in owners
    return mine / held if held else 1.0


def _named(word: str) -> str:
    """A word as a name key: "Tom's crash" names Tom."""
    return possessive_dropped(word.casefold().replace("’", "'"))


def _speaker(label: str) -> str:
    return _ROLE_NOTE_RE.sub("", label).strip()


def _name_key(speaker: str) -> str:
    """A speaker as a summary names them: the first word of the label, case-folded."""
    words = _TOKEN_RE.findall(speaker)
    return words[0].casefold() if words else speaker.casefold()


def _said(lines: Sequence[Line], speakers: list[str], lang: str) -> list[_Sentence]:
    """Each sentence of `lines` with its content roots and owners (see the module docstring)."""
    names = {_name_key(s): s for s in speakers}
    said = []
    for line in lines:
        # Addressed: the other speaker of a two-person exchange (a reply, or the user to it).
        others = [s for s in speakers if s != line.speaker]
        addressee = others[0] if len(others) == 1 else None
        parts = [
            (part, question)
            for text, _ in split_sentences(line.text)
            for clause in _thanks_apart(text)
            for part, question in zip(asked_part(clause), (False, True), strict=True)
        ]
        for text, question in parts:
            if not text.strip():
                continue
            words = _tokens(text)
            folded = {w.casefold().replace("’", "'") for w in words}
            owners: set[str] = set()
            if folded & _FIRST_PERSON:
                owners.add(line.speaker)
            if folded & _SECOND_PERSON and addressee is not None:
                owners.add(addressee)
                if not question:
                    owners.add(line.speaker)  # "your drive is awesome": the speaker's view too
            # A plain statement is its speaker's, weakly: "That charity race sounds great" echoes
            # the race of the one who said "I ran a charity race".
            weak = {line.speaker} if not owners and not question else set()
            roots = frozenset(_root(w) for w in words if _is_content(w, names, lang))
            said.append(
                _Sentence(line.speaker, roots, frozenset(owners), frozenset(weak), question, line.other)
            )
    return said


def _thanks_apart(sentence: str) -> list[str]:
    """A sentence that thanks as its clauses: "thanks for asking, we got a cat" thanks the one
    addressed for the asking, not for the cat."""
    if {w.casefold() for w in _TOKEN_RE.findall(sentence)} & _THANKS:
        return _CLAUSE_RE.split(sentence)
    return [sentence]


def _tokens(text: str) -> list[str]:
    # "five years" and "5 years" are one fact; text2num is written in Rust: an odd input must not
    # cost a memory.
    with contextlib.suppress(Exception):
        text = alpha2digit(text, "en", threshold=0)
    return _TOKEN_RE.findall(text)


def _subjects(
    words: list[str], names: dict[str, str], previous: frozenset[str]
) -> tuple[frozenset[str], bool]:
    """The speakers a sentence opens with ("Caroline and Melanie"), or the last ones for "She ...",
    and whether a verb of speech follows them."""
    subjects: set[str] = set()
    index = 0
    while index < len(words):
        folded = words[index].casefold()
        if folded in names:
            subjects.add(names[folded])
        elif not (subjects and folded in _JOINERS):
            break
        index += 1
    if not subjects and words and words[0].casefold() in _PRONOUNS and len(previous) == 1:
        subjects, index = set(previous), 1
    speech = index < len(words) and words[index].casefold() in _SPEECH
    return frozenset(subjects), speech


def _stated_question(text: str, words: list[str], found: set[str], sentences: list[_Sentence]) -> bool:
    """Whether a sentence states what was only asked: most of its content from questions alone."""
    if "?" in text or any(w.casefold() in _NOT_ASSERTED for w in words):
        return False
    if words and words[0].casefold() in _INTERROGATIVE:
        return False  # "Did the ferns survive." is still asked, however it ends: it states nothing
    stated = {r for s in sentences if not s.other and not s.question for r in s.roots}
    asked = {r for s in sentences if not s.other and s.question for r in s.roots} - stated
    only_asked = found & asked
    return len(only_asked) >= MIN_EVIDENCE and len(only_asked) > len(found & stated)


def asked_part(sentence: str) -> tuple[str, str]:
    """A sentence as (what it states, what it asks). A question asks from its first clause opening
    with an asking word ("hey Sage, how often do you..."), else only its last clause: "I started a
    store, can you believe it?" states its store, and "..., right?" asks nothing."""
    if "?" not in sentence:
        return sentence, ""
    clauses = _CLAUSE_RE.split(sentence)
    first = next(
        (n for n, c in enumerate(clauses) if c.split()[:1] and c.split()[0].casefold() in _INTERROGATIVE),
        len(clauses) - 1,
    )
    return ", ".join(clauses[:first]), ", ".join(clauses[first:])


def _question_runs(lines: Sequence[Line]) -> set[tuple[str, ...]]:
    """The runs of QUESTION_RUN words (stems, two content words at least) of what the exchange's own
    questions ask (`asked_part`) that none of its statements holds."""
    asked: set[tuple[str, ...]] = set()
    stated: set[tuple[str, ...]] = set()
    for line in lines:
        if line.other:
            continue
        for text, _ in split_sentences(line.text):
            statement, question = asked_part(text)
            asked.update(_runs(_tokens(question)))
            stated.update(_runs(_tokens(statement)))
    return asked - stated


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    stems = [w if w[0].isdigit() else word_stem(w) for w in words]
    content = [s[0].isdigit() or (len(s) >= 3 and zipf(s) < FUNCTION_ZIPF) for s in stems]
    return {
        tuple(stems[i : i + QUESTION_RUN])
        for i in range(len(stems) - QUESTION_RUN + 1)
        if sum(content[i : i + QUESTION_RUN]) >= 2
    }


def _repeats_question(text: str, words: list[str], asked_runs: set[tuple[str, ...]]) -> bool:
    """Whether a sentence that asks nothing repeats a run of words only a question said."""
    if not asked_runs or "?" in text or any(w.casefold() in _NOT_ASSERTED for w in words):
        return False
    if words and words[0].casefold() in _INTERROGATIVE:
        return False  # "Did the ferns survive." still asks
    return bool(_runs(words) & asked_runs)


def _is_content(word: str, names: dict[str, str], lang: str) -> bool:
    folded = word.casefold()
    if folded[0].isdigit():
        return True
    if len(folded) < 3 or folded in names or folded in _FILLER:
        return False
    return zipf(folded, lang) < FUNCTION_ZIPF


def _root(word: str) -> str:
    if word[0].isdigit():
        return word
    stem = word_stem(word)
    return verb_base(stem)[:ROOT_CHARS] if stem.isascii() else stem
