"""The extractive summarizer: the most fact-dense sentences of an exchange within a token budget.

Used when no summarizer model is configured or the model fails, so a memory always gets a summary
(pure, no I/O). Tokens are counted with the one token counter, `memory.tokens`. Each kept sentence
stays under its own speaker's `Name:` label (a line's later sentences are still its speaker's), so
a reply's sentence is never put in the user's mouth.
"""

from __future__ import annotations

import heapq
import math
import re

from memory.formation.cleaning import speaker_label, strip_chat_template_tokens, strip_roleplay_formatting
from memory.formation.fidelity import extract_key_facts
from memory.tokens import count_tokens, truncate_to_tokens

_WHITESPACE_RUN_RE = re.compile(r"\s+")
_WORD_CHARACTER_RE = re.compile(r"\w")
_LEADING_NON_WORD_RE = re.compile(r"^[^\w]+")
_SENTENCE_MARKS = ".!?…"
_CLOSING_QUOTES = "\"'”’)]"
_POSITION_WEIGHT = 0.5
_FACT_WEIGHT = 2.0
_SHORT_SENTENCE_TOKENS = 4
_SHORT_SENTENCE_PENALTY = 0.5


def split_sentences(text: str) -> list[tuple[str, str]]:
    """Return (sentence, separator before it) pairs; the separator is "\n" or " "."""
    pieces: list[tuple[str, str]] = []
    position = 0
    separator = ""
    for gap in _WHITESPACE_RUN_RE.finditer(text):
        start = gap.start()
        before = text[max(0, start - 2) : start]
        newline = "\n" in gap.group()
        ends_sentence = (bool(before) and before[-1] in _SENTENCE_MARKS) or (
            len(before) == 2 and before[0] in _SENTENCE_MARKS and before[1] in _CLOSING_QUOTES
        )
        if not (newline or ends_sentence):
            continue
        if start > position:
            pieces.append((text[position:start], separator))
        separator = "\n" if newline else " "
        position = gap.end()
    if position < len(text):
        pieces.append((text[position:], separator))
    return pieces


def _cut(text: str, budget: int) -> str:
    """The start of `text` within `budget` tokens, from its first word on; never empty if it has one."""
    text = _LEADING_NON_WORD_RE.sub("", text)
    # A cut inside a multi-byte character decodes to U+FFFD: that is no text of the source.
    kept = truncate_to_tokens(text, budget).strip("\ufffd").strip()
    return kept or text[:1]


def _spoken(text: str) -> list[tuple[int, str, str, str]]:
    """The text's sentences as (turn, speaker, sentence, separator before it): a `Name:` label opens
    a turn; a line without one goes on the turn before it (a message's later line)."""
    units: list[tuple[int, str, str, str]] = []
    turn = 0
    speaker = ""
    for number, line in enumerate(text.split("\n")):
        label = speaker_label(line)
        body = line
        if label is not None:
            turn += 1
            speaker = label.group(1)
            body = line[label.end() :]
        for index, (sentence, separator) in enumerate(split_sentences(body)):
            units.append((turn, speaker, sentence, "\n" if number and not index else separator))
    return units


def _label(speaker: str) -> str:
    return f"{speaker}: " if speaker else ""


def extractive_summary(text: str, max_tokens: int) -> str:
    """Pick the most fact-dense sentences, in their original order, within `max_tokens`.

    The text is cleaned first; if the cleaned text fits the budget it is returned as is, otherwise the
    result is strictly shorter than it. Non-empty whenever the cleaned text is. Each sentence kept
    is under its speaker's label (see the module docstring).
    """
    cleaned = strip_roleplay_formatting(strip_chat_template_tokens(text))
    budget = max(1, max_tokens)
    if not cleaned or count_tokens(cleaned) <= budget:
        return cleaned
    units = _spoken(cleaned)
    sentences = [u[2] for u in units]
    count = len(sentences)
    tokens = [count_tokens(s) for s in sentences]
    labels = {u[0]: count_tokens(_label(u[1])) if u[1] else 0 for u in units}
    facts = [extract_key_facts(s) for s in sentences]
    base = []
    for i in range(count):
        position = 1.0 if i == 0 else 0.5 if i == count - 1 else 1.0 / math.sqrt(i + 1)
        penalty = _SHORT_SENTENCE_PENALTY if tokens[i] < _SHORT_SENTENCE_TOKENS else 0.0
        base.append(_POSITION_WEIGHT * position - penalty)

    def gain(i: int, covered: set[str]) -> float:
        # Only facts no chosen sentence has yet: repeating a name adds nothing.
        new = len(facts[i] - covered)
        return base[i] + _FACT_WEIGHT * new / math.sqrt(max(1, tokens[i]))

    covered: set[str] = set()
    chosen: list[int] = []
    turns: set[int] = set()
    seen: set[str] = set()
    used = 0
    # Lazy greedy: a sentence's gain only falls as facts get covered, so a stale heap entry is an upper bound.
    heap = [(-gain(i, covered), i) for i in range(count)]
    heapq.heapify(heap)
    while heap and used < budget:
        stale, i = heapq.heappop(heap)
        current = gain(i, covered)
        if current < -stale - 1e-9:
            heapq.heappush(heap, (-current, i))
            continue
        key = sentences[i].casefold()
        # The separator joining it to the others costs a token too, and its speaker's label the
        # first time its turn is kept (an upper bound: a label opens a run of one speaker's turns).
        turn = units[i][0]
        cost = tokens[i] + (1 if chosen else 0) + (0 if turn in turns else labels[turn])
        if used + cost > budget or key in seen:
            continue
        seen.add(key)
        chosen.append(i)
        turns.add(turn)
        covered |= facts[i]
        used += cost
    if not chosen:
        wordy = [i for i in range(count) if _WORD_CHARACTER_RE.search(sentences[i])]
        if not wordy:
            return _cut(cleaned, budget)
        best = max(wordy, key=lambda i: (gain(i, set()), -i))
        return _cut(_label(units[best][1]) + sentences[best], budget)
    chosen.sort()
    summary = _joined([units[i] for i in chosen])
    # Tokens are not quite additive over the joins: check the whole against the budget once more.
    if len(summary) >= len(cleaned) or count_tokens(summary) > budget:
        return _cut(summary if len(summary) < len(cleaned) else cleaned, budget)
    return summary


def _joined(units: list[tuple[int, str, str, str]]) -> str:
    """Kept sentences in order: a new line under its label where the speaker changes."""
    parts: list[str] = []
    last: tuple[int, str] | None = None
    for turn, speaker, sentence, separator in units:
        if last is None:
            parts.append(_label(speaker) + sentence)
        elif speaker != last[1]:
            parts.append("\n" + _label(speaker) + sentence)
        else:
            parts.append((separator if turn == last[0] else " ") + sentence)
        last = (turn, speaker)
    return "".join(parts)
