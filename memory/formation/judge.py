"""The judge: one model answer read against its own exchange, kept as a summary or refused with why.

A refusal, an empty answer, or a summary stating a name, number or date that neither the user's
lines nor the reply hold (invented, or another user's) is refused; so is one about another exchange
of its call or the context, one that stops before a sentence ends, one using another user's
distinctive words, one giving a speaker's words to the other or stating what was only asked, one
telling an event none of whose words its exchange said (memory.formation.attribution), and one
written in a speaker's voice (their label, or "I") rather than about them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memory.formation.answers import clean_answer, in_a_speakers_voice, off_exchange, whole_sentences
from memory.formation.attribution import check_attribution, exchange_lines
from memory.formation.cleaning import speaker_label
from memory.formation.extractive import extractive_summary
from memory.formation.fidelity import Vocabulary, foreign_facts, vocabulary, word_stem, zipf
from memory.formation.summary_types import ExchangeText, FallbackReason

_REFUSAL_RE = re.compile(
    r"^(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|as an ai\b|i can(?:no|')?t\b|i cannot\b"
    r"|i(?:'m| am) (?:not able|unable)|i won'?t\b|unfortunately,? i\b)",
    re.IGNORECASE,
)
# An answer with these faults is asked again, alone and without context, before going extractive.
ASKED_AGAIN = frozenset(
    {
        FallbackReason.INVENTED,
        FallbackReason.OTHER_USER,
        FallbackReason.OFF_EXCHANGE,
        FallbackReason.CUT,
        FallbackReason.MISATTRIBUTED,
    }
)
_WORD_RE = re.compile(r"[^\W\d_](?:\w|['’-](?=[^\W\d_]))*")
# Another user's word in a summary is one that names something: long enough, and not everyday.
_OTHERS_WORD_MIN_CHARS = 4
_OTHERS_WORD_MAX_ZIPF = 5.0


@dataclass(slots=True)
class Asked:
    """An exchange on its way through a batch: its source, cap and the vocabularies it is checked by."""

    exchange: ExchangeText
    source: str
    tokens: int
    cap: int
    _allowed: Vocabulary | None = None
    _others: Vocabulary | None = None
    # The exchanges of other users asked in the same call: someone else's words too.
    neighbours: list[str] = field(default_factory=list)
    # Every other exchange of the call and every context line: what an answer about its own exchange
    # does not take its distinctive words from.
    elsewhere: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> Vocabulary:
        """What the user's lines, the replies and the user's own earlier lines hold."""
        if self._allowed is None:
            own = "\n".join(f"{q.speaker}: {q.text}" for q in self.exchange.context if not q.other)
            # As said, not cleaned: a number inside an *action* or an emoticon was said too.
            self._allowed = vocabulary(f"{self.source}\n{own}")
        return self._allowed

    @property
    def others(self) -> Vocabulary:
        """What other users' lines (and the replies to them) hold."""
        if self._others is None:
            theirs = [q.text for q in self.exchange.context if q.other]
            self._others = vocabulary("\n".join([*theirs, *self.neighbours]))
        return self._others


@dataclass(frozen=True, slots=True)
class Verdict:
    summary: str
    reason: FallbackReason | None = None
    detail: str | None = None


def is_refusal(answer: str) -> bool:
    """Whether the answer opens by refusing ("I'm sorry, but I can't...")."""
    return _REFUSAL_RE.match(clean_answer(answer)) is not None


def judge_answer(item: Asked, answer: str) -> Verdict:
    """The answer for one exchange as a summary to keep, or the reason it is not one."""
    cleaned = clean_answer(answer)
    if not cleaned:
        return Verdict("", FallbackReason.UNPARSEABLE)
    if _REFUSAL_RE.match(cleaned):
        return Verdict("", FallbackReason.REFUSED)
    summary = whole_sentences(cleaned)
    if not summary:
        return Verdict("", FallbackReason.CUT, "no sentence ends")
    if len(summary) >= len(item.source):
        # Longer than what was said is no summary: keep what it said within the cap.
        summary = extractive_summary(summary, item.cap)
        if not summary or len(summary) >= len(item.source):
            return Verdict("", FallbackReason.UNPARSEABLE)
    voice = in_a_speakers_voice(summary, {*item.exchange.names, *labels_of(item.exchange.text)})
    if voice is not None:
        return Verdict(summary, FallbackReason.MISATTRIBUTED, voice)
    foreign = foreign_facts(summary, item.allowed, names=item.exchange.names)
    if foreign:
        # Another user's when every such fact is in their lines; a fact nobody said is invented.
        nobodys = set(foreign) & set(foreign_facts(summary, item.others, names=item.exchange.names))
        reason = FallbackReason.INVENTED if nobodys else FallbackReason.OTHER_USER
        return Verdict(summary, reason, ", ".join(foreign))
    words = others_words(summary, item)
    if words:
        return Verdict(summary, FallbackReason.OTHER_USER, ", ".join(words))
    speakers = [name.casefold() for name in item.exchange.names]
    wrong = off_exchange(summary, item.source, item.elsewhere, speakers=speakers)
    if wrong is not None:
        return Verdict(summary, FallbackReason.OFF_EXCHANGE, wrong)
    # Who said what: names and numbers can all be right and still be given to the wrong speaker.
    said = check_attribution(summary, exchange_lines(item.exchange.text, item.exchange.context))
    if said.others_claims:
        return Verdict(summary, FallbackReason.OTHER_USER, said.detail())
    if said.unsaid:
        return Verdict(summary, FallbackReason.INVENTED, said.detail())
    if said.wrong:
        return Verdict(summary, FallbackReason.MISATTRIBUTED, said.detail())
    return Verdict(summary)


def others_words(summary: str, item: Asked) -> list[str]:
    """Words of the summary that only another user's lines hold (not the exchange's own)."""
    others = item.others.words
    if not others:
        return []
    found = set()
    for word in _WORD_RE.findall(summary):
        stem = word_stem(word)
        if (
            len(stem) >= _OTHERS_WORD_MIN_CHARS
            and stem in others
            and stem not in item.allowed.words
            and zipf(stem) < _OTHERS_WORD_MAX_ZIPF
        ):
            found.add(stem)
    return sorted(found)


def labels_of(text: str) -> set[str]:
    """The speakers' labels of an exchange's lines ("User" for a user with no name)."""
    return {
        label.group(1).strip() for line in text.splitlines() if (label := speaker_label(line)) is not None
    }
