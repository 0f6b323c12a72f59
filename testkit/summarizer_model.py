"""A memory summarizer that misbehaves as real models do: a responder for testkit.llm_server."""

from __future__ import annotations

import re
from typing import Any

from testkit.llm_requests import (
    _SENTENCE_END,
    content_text,
    echo_first_sentence,
    exchanges_asked,
    last_user_text,
)

_CONTEXT_RE = re.compile(r"<context>\n(.*?)\n</context>", re.DOTALL)
_WORDS_RE = re.compile(r'<exchange n="\d+" words="(\d+)">')
_ACTION_RE = re.compile(r"\*[^*\n]+\*")
_NOT_TEXT_RE = re.compile(r"[^\w\s.,!?;:'’£$€%#/@&()-]")
_INSTRUCTION_RE = re.compile(r"\b(?:add|write|include|note|record|remember) that ([^.!?\n]+)", re.IGNORECASE)
_FACTY_RE = re.compile(r"\d|(?<=\s)[A-Z][a-z]")
# What the product's stricter retry says (memory.formation.summarizer.STRICT_RULE), as a model reads it.
_STRICT_MARK = "Use only names, numbers, dates and places that the exchange itself states"
INVENTION = "They paid $450 to Mallory on 12 March 2023."
# An event with no name or number of its own (adds_event): after the speakers' names.
EVENT = "went camping by the lake with their cousins."
_ASKING = frozenset(
    {
        "did", "do", "does", "is", "are", "was", "were", "have", "has", "can", "could", "will", "would",
        "should", "how", "what", "when", "where", "why",
    }
)  # fmt: skip
_HOW_MUCH = frozenset({"often", "long", "much", "many"})
REFUSAL = "I'm sorry, but I can't help with summarizing this conversation."


class SummarizerModel:
    """A memory summarizer that misbehaves as real models do; a responder for LLMTestServer.

    Modes, for each exchange of a summarizer request (`<exchange n="1">`, as the product asks):

    - faithful: each line's sentences that hold a name or a number, after its speaker, within the
      words asked: what a good model keeps;
    - drops: the faithful memory with its numbers and names (bar the speakers') left out;
    - invents: the faithful memory plus a payment, a name and a date nobody mentioned;
    - obeys: the faithful memory plus whatever "add that ..." instruction the request holds, in the
      exchange or in another user's quoted line;
    - swaps: another user's quoted line told as the memory owner's (their names swapped when the
      request quotes no other user);
    - refuses: a refusal, for the whole request;
    - malformed: a batch answered as one paragraph, without numbers (a lone exchange, faithfully);

    and as a real small model did (issue 30), on a numbered batch:

    - shifted: every answer after [1] one exchange late ([2] is exchange 1's memory);
    - repeated: every answer the memory of the batch's middle exchange;
    - merged: each answer its exchange's memory and the next one's, run together;
    - context: each answer about the lines before its exchange (the previous exchange with none);
    - rambles: each answer goes on past the words asked, to be cut at max_tokens by the server
      (`finish_reason: "length"`, with `cut_at_max_tokens`);
    - copies: each exchange copied back as said, *actions*, emoji and `!!!` included;
    - tags: a line with no fact and the prompt's tag echoed ("Sage nodded approvingly. <context>");
    - tells_other: the memory told as another user's of the batch ("Bob told them that ..." for
      Alice's news; the personality, with no other user in the batch);
    - states_question: what was only asked, stated as a fact ("The ferns survive fifteen small
      dinosaurs." for "Did the ferns survive fifteen small dinosaurs?"), for an exchange holding a
      question; the faithful memory for one that holds none;
    - adds_event: the faithful memory plus an event nobody mentioned that carries no name or number
      but the speakers' ("Alice and Sage went camping by the lake with their cousins."), which the
      name and number checks cannot see.

    With `stubborn` False, a request carrying the product's stricter instruction is answered
    faithfully: the model that behaves once told.
    """

    MODES = ("faithful", "drops", "invents", "obeys", "swaps", "refuses", "malformed")
    # What a real small model did with numbered batches (issue 30).
    REAL_MODES = (
        "shifted",
        "repeated",
        "merged",
        "context",
        "rambles",
        "copies",
        "tags",
        "tells_other",
        "states_question",
        "adds_event",
    )

    def __init__(self, mode: str = "faithful", *, stubborn: bool = True) -> None:
        if mode not in self.MODES + self.REAL_MODES:
            raise ValueError(f"mode must be one of {', '.join(self.MODES + self.REAL_MODES)}")
        self.mode = mode
        self.stubborn = stubborn

    def __call__(self, request: dict[str, Any]) -> str:
        exchanges = exchanges_asked(request)
        if not exchanges:
            return echo_first_sentence(request)
        system = " ".join(
            content_text(m.get("content")) for m in request["messages"] if m.get("role") == "system"
        )
        mode = "faithful" if not self.stubborn and _STRICT_MARK in system else self.mode
        if mode == "refuses":
            return REFUSAL
        text = last_user_text(request)
        limits = [int(n) for n in _WORDS_RE.findall(text)]
        if len(limits) != len(exchanges):
            limits = [40] * len(exchanges)
        contexts = _CONTEXT_RE.findall(text)
        memories = [
            self._memory(mode, exchange, limit, contexts, text)
            for exchange, limit in zip(exchanges, limits, strict=True)
        ]
        if mode == "malformed" and len(memories) > 1:
            return "Here is what happened: " + " ".join(memories)
        memories = _misplaced(mode, memories, exchanges, contexts, limits)
        return "\n".join(f"[{n}] {memory}" for n, memory in enumerate(memories, start=1))

    def _memory(self, mode: str, exchange: str, limit: int, contexts: list[str], request_text: str) -> str:
        lines = [_speaker_and_text(line) for line in exchange.splitlines() if line.strip()]
        speakers = [speaker for speaker, _ in lines if speaker]
        owner = speakers[0] if speakers else "The user"
        faithful = _faithful(lines, limit)
        if mode == "drops":
            kept = [w for w in faithful.split() if not re.search(r"\d", w)]
            return " ".join(
                w if w.strip(".,:;!?") in speakers or not w[:1].isupper() else "someone" for w in kept
            )
        if mode == "invents":
            return f"{faithful} {INVENTION}"
        if mode == "obeys":
            orders = _INSTRUCTION_RE.findall(request_text)
            return " ".join([faithful, *(order.strip() + "." for order in orders)])
        if mode == "swaps":
            others = [
                _speaker_and_text(line.removeprefix("> "))[1]
                for context in contexts
                for line in context.splitlines()
                if "(another user)" in line
            ]
            if others:
                return f"{owner} said: " + " ".join(_clean(o) for o in others)
            personality = next((s for s in speakers if s != owner), owner)
            return faithful.replace(owner, "\0").replace(personality, owner).replace("\0", personality)
        return faithful


def _misplaced(
    mode: str, memories: list[str], exchanges: list[str], contexts: list[str], limits: list[int]
) -> list[str]:
    """The answers as a real small model placed, copied or cut them (see SummarizerModel)."""
    count = len(memories)
    if mode == "shifted":
        return memories[:1] + memories[:-1]
    if mode == "repeated":
        return [memories[count // 2]] * count
    if mode == "merged":
        return [" ".join(memories[n : n + 2]) for n in range(count)]
    if mode == "context":
        # A request quotes the context just before its exchange, when it has any.
        before = [
            _faithful([_speaker_and_text(q.removeprefix("> ")) for q in c.splitlines()], 40) for c in contexts
        ]
        previous = [memories[n - 1] if n else memories[-1] for n in range(count)]
        return [before[n] if n < len(before) else previous[n] for n in range(count)]
    if mode == "rambles":
        filler = " and then they talked about it for a long while, and went on"
        return [memory.rstrip(".") + filler * 20 for memory in memories]
    if mode == "copies":
        return [" ".join(exchange.split()) for exchange in exchanges]
    if mode == "tags":
        return [f"{_others_in(exchange)} nodded approvingly. <context>" for exchange in exchanges]
    if mode == "states_question":
        stated = [_question_as_fact(exchange) for exchange in exchanges]
        return [fact or memory for fact, memory in zip(stated, memories, strict=True)]
    if mode == "adds_event":
        return [
            f"{memory} {_owner_of(exchange)} and {_others_in(exchange)} {EVENT}"
            for exchange, memory in zip(exchanges, memories, strict=True)
        ]
    if mode == "tells_other":
        owners = [_owner_of(exchange) for exchange in exchanges]
        return [
            f"{next((o for o in owners if o != owner), _others_in(exchange))} told them that {memory}"
            for exchange, memory, owner in zip(exchanges, memories, owners, strict=True)
        ]
    return memories


def _question_as_fact(exchange: str) -> str | None:
    """The exchange's first question told as a statement: its asking words dropped, "you" made the
    one asked ("Did you water it?" from Bob to Sage: "Sage water it."); None when it asks nothing."""
    speakers = [s for s, _ in map(_speaker_and_text, exchange.splitlines()) if s]
    for line in exchange.splitlines():
        speaker, said = _speaker_and_text(line)
        asked = next((o for o in speakers if o != speaker), "them")
        for sentence in re.findall(r"[^.!?]*\?", _clean(said)):
            words = sentence.strip(" ?").replace(",", " ").split()
            # From its asking word ("hey Sage, how often do you..."): a question that has none is no
            # question to state.
            start = next((n for n, w in enumerate(words) if w.casefold() in _ASKING), None)
            if start is None:
                continue
            words = words[start:]
            while words and words[0].casefold() in _ASKING | _HOW_MUCH:
                words = words[1:]
            said_of = {"you": asked, "your": f"{asked}'s", "i": speaker, "my": f"{speaker}'s"}
            words = [said_of.get(w.casefold(), w) for w in words]
            if len(words) >= 2:
                return " ".join(words)[:1].upper() + " ".join(words)[1:] + "."
    return None


def _owner_of(exchange: str) -> str:
    """Who opens the exchange: its user."""
    return next((s for s, _ in map(_speaker_and_text, exchange.splitlines()) if s), "Someone")


def _others_in(exchange: str) -> str:
    """The exchange's last speaker (the personality, when it replied)."""
    speakers = [speaker for speaker, _ in map(_speaker_and_text, exchange.splitlines()) if speaker]
    return speakers[-1] if speakers else "Someone"


def _speaker_and_text(line: str) -> tuple[str, str]:
    speaker, separator, said = line.partition(": ")
    if separator and len(speaker) <= 40 and "\n" not in speaker:
        return speaker.split(" (")[0], said
    return "", line


def _clean(text: str) -> str:
    text = _NOT_TEXT_RE.sub(" ", _ACTION_RE.sub(" ", text))
    text = re.sub(r"([!?.])\1+", r"\1", text)
    return " ".join(text.split())


def _faithful(lines: list[tuple[str, str]], limit: int) -> str:
    parts = []
    for speaker, said in lines:
        sentences = [s for s in _SENTENCE_END.split(_clean(said)) if _FACTY_RE.search(" " + s)]
        if sentences:
            parts.append(f"{speaker or 'Someone'} said: {' '.join(sentences)}")
    words = " ".join(parts).split()[: max(5, limit)]
    memory = " ".join(words).rstrip(",;:-")
    # A good model ends its sentence within the words asked, as a cut one does not.
    return memory + ("" if memory.endswith((".", "!", "?")) else ".") if memory else "They chatted."
