"""A model's answer read back: split by number, cleaned like the input, ended where a sentence ends,
and checked to be about its own exchange.

A real small model (issue 30) shifts or repeats its numbered answers, summarizes the context instead of
the exchange, echoes the prompt's tags, copies the input with its emoji, and stops at max_tokens in the
middle of a sentence. What comes back is therefore read as unreliable: each answer is cleaned of all
formatting, cut back to its last whole sentence, and kept only when it holds words of its own exchange
and no distinctive word that only another exchange of the call (or a context line) said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memory.formation.cleaning import (
    clean_summary_output,
    strip_chat_template_tokens,
    strip_roleplay_formatting,
)
from memory.formation.fidelity import vocabulary, word_stem, zipf

_TAG_RE = re.compile(r"<(\s*/?\s*(?:exchange|context)\b)", re.IGNORECASE)
# What a model echoes of the request's markup: its tags (whole or cut), quoted-line marks, numbers.
_PROMPT_TAG_RE = re.compile(
    r"</?\s*(?:exchange|context)\b[^>\n]*>?|‹\s*/?\s*(?:exchange|context)\b[^>\n]*>?", re.I
)
_QUOTE_MARK_RE = re.compile(r"^\s*>+\s?", re.MULTILINE)
_STRAY_NUMBER_RE = re.compile(r"(?:^|\s)\[\d{1,3}\](?=\s|$)")
_NUMBERED_RE = re.compile(r"^[\s*_#>-]*(?:\[(\d{1,3})\]|\((\d{1,3})\)|(\d{1,3})[.):])[*_]*\s*(.*)$")
_WORD_RE = re.compile(r"[^\W\d_](?:\w|['’-](?=[^\W\d_]))*")
_SENTENCE_RE = re.compile(r"[^.!?…]*[.!?…]+[\"'”’)\]]*")
_SENTENCE_MARKS = ".!?…"
_CLOSERS = "\"'”’)]"
# A summary tells what its speakers said, by name: a first-person word is a speaker talking (a line
# copied, or a line made up in a speaker's voice), and whose "I" it is the memory would not say.
_FIRST_PERSON_RE = re.compile(r"\b(?:I|I['’](?:m|ve|d|ll)|(?i:me|my|mine|myself))\b")
# A distinctive word: long enough, and rarer than everyday words ("told", "about", "really").
DISTINCTIVE_MIN_CHARS = 4
DISTINCTIVE_MAX_ZIPF = 5.0


def quoted_data(text: str) -> str:
    """Text put between the request's tags, unable to close or open one of them."""
    return _TAG_RE.sub(r"‹\1", text)


def parse_numbered(answer: str, count: int) -> list[str] | None:
    """The answer's memories by number, [1] to [count] each once; None when the answer is not so.

    Lines before the first number (a preamble) are dropped; unnumbered lines after one continue it.
    A lone exchange's answer may carry no number at all.
    """
    entries: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in answer.splitlines():
        match = _NUMBERED_RE.match(line)
        if match is not None:
            number = int(next(group for group in match.groups()[:3] if group is not None))
            if number in entries or not 1 <= number <= count:
                return None
            current = entries[number] = [match.group(4)]
        elif current is not None and line.strip():
            current.append(line.strip())
    if not entries and count == 1:
        return [answer]
    if len(entries) != count:
        return None
    return [" ".join(entries[n]).strip() for n in range(1, count + 1)]


def clean_answer(answer: str) -> str:
    """The answer cleaned as the exchange is: template tokens, lead-ins, prompt tags and quote marks,
    then roleplay formatting (*actions*, emoji, repeated marks), one line."""
    text = clean_summary_output(answer)
    text = _QUOTE_MARK_RE.sub("", _PROMPT_TAG_RE.sub(" ", text))
    text = _STRAY_NUMBER_RE.sub(" ", text)
    text = strip_roleplay_formatting(strip_chat_template_tokens(text))
    return " ".join(text.split())


def whole_sentences(text: str) -> str:
    """The text up to the end of its last whole sentence ("" when no sentence ends): an answer cut at
    max_tokens loses its unfinished tail, never stored mid-sentence."""
    text = text.strip()
    if (
        not text
        or text[-1] in _SENTENCE_MARKS
        or (text[-1] in _CLOSERS and text.rstrip(_CLOSERS)[-1:] in _SENTENCE_MARKS)
    ):
        return text
    sentences = _SENTENCE_RE.findall(text)
    return "".join(sentences).strip()


def distinctive_words(text: str) -> set[str]:
    """The stems of the words of `text` that name something: not everyday words, not numbers."""
    found = set()
    for word in _WORD_RE.findall(text):
        stem = word_stem(word)
        if len(stem) < DISTINCTIVE_MIN_CHARS or zipf(stem) >= DISTINCTIVE_MAX_ZIPF:
            continue
        if not vocabulary(word).numbers:  # "eleven" is a number, checked as one
            found.add(stem)
    return found


def off_exchange(
    summary: str, own: str, elsewhere: Iterable[str], *, speakers: Iterable[str] = ()
) -> str | None:
    """Why the summary is not about its own exchange, or None when it is.

    It must say something of its own exchange (a distinctive word of it, or failing any, any word of
    four letters or more; the speakers' names are no content), and no distinctive word that only
    another exchange of the call or a context line holds: a shifted, repeated or merged answer, or one
    about the context.
    """
    own_words = vocabulary(own).words
    names = {word_stem(name) for speaker in speakers for name in speaker.split()}
    said = distinctive_words(summary)
    theirs: set[str] = set()
    for text in elsewhere:
        theirs |= distinctive_words(text)
    foreign = sorted(word for word in said if word in theirs and word not in own_words)
    if foreign:
        return "another exchange's words: " + ", ".join(foreign[:5])
    mine = (said & own_words) - names
    if not mine:
        long_words = {word_stem(w) for w in _WORD_RE.findall(summary) if len(w) >= DISTINCTIVE_MIN_CHARS}
        mine = (long_words & {w for w in own_words if zipf(w) < 6.0}) - names
    if not mine:
        return "nothing of its own exchange"
    return None


def in_a_speakers_voice(summary: str, speakers: Iterable[str]) -> str | None:
    """Why the summary is a speaker talking rather than a summary of what they said ("Melanie: Thank
    you, Caroline! I'm so glad you enjoyed the wedding."), or None: a speaker's label in it, or a
    first-person word (SmolLM2 wrote 7 such memories of 18 on LoCoMo dev 26, every other check passed)."""
    names = [name for name in speakers if name]
    for name in names:
        if re.search(rf"(?:^|[\s.!?…]){re.escape(name)}\s*:", summary, re.IGNORECASE):
            return f"a speaker's label ({name}:)"
    # "Bob said: I booked Lisbon" says whose "I" it is; "I'm a career counselor." does not.
    if any(re.search(rf"\b{re.escape(name)}\b", summary, re.IGNORECASE) for name in names):
        return None
    found = _FIRST_PERSON_RE.search(summary)
    return f"in the first person ({found.group(0)!r}), naming no speaker" if found is not None else None
