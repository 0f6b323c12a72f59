"""Turn exchanges into memory summaries with the personality's LLM, or extractively without one.

Several exchanges of one conversation share a call: numbered in the request, numbered in the
answer, each answer parsed back to its own exchange and checked against its own user's lines; an
answer that cannot be parsed so is asked again one call per exchange. Earlier messages reach the
model only as quoted, attributed data between tags that the instruction calls data, never
instructions.

Every summary is checked before it is kept: a refusal, an empty answer, or a summary stating a name,
number or date that neither the user's lines nor the reply hold (invented, or another user's) is
rejected. A summary with facts of its own is asked once more with a stricter instruction and no
context; then the extractive summary takes its place. Each result says how it was made: by the model,
or extractive and why (`FallbackReason`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory.formation.answers import (
    clean_answer,
    off_exchange,
    parse_numbered,
    quoted_data,
    whole_sentences,
)
from memory.formation.attribution import check_attribution, exchange_lines
from memory.formation.chunking import split_into_chunks
from memory.formation.cleaning import clean_summary_output, strip_chat_template_tokens
from memory.formation.extractive import extractive_summary
from memory.formation.fidelity import Vocabulary, foreign_facts, vocabulary, word_stem, zipf
from memory.formation.pace import BatchPace
from memory.formation.summarizer_prompt import (
    DEFAULT_SUMMARIZER_PROMPT,
    EXAMPLE_ANSWER,
    EXAMPLE_EXCHANGES,
    FORMAT_RULES,
    STRICT_RULE,
)
from memory.llm import LLMClient, LLMConfigError, LLMTimeoutError, LLMUnavailableError
from memory.tokens import count_tokens
from memory.types import ModelConfig

__all__ = [
    "DEFAULT_SUMMARIZER_PROMPT",
    "EXTRACTIVE",
    "FORMAT_RULES",
    "STRICT_RULE",
    "ExchangeSummarizer",
    "ExchangeText",
    "FallbackReason",
    "Quoted",
    "SummaryResult",
    "parse_numbered",
    "quoted_data",
    "split_into_chunks",
    "summary_token_cap",
]

log = logging.getLogger(__name__)

EXTRACTIVE = "extractive"
# Exchanges summarized in one call: the instruction is paid once per batch, not once per exchange.
BATCH_EXCHANGES = 8
# A fallback reason is logged once in this many seconds, not once per exchange.
LOG_EVERY_SECONDS = 600.0


class FallbackReason(enum.StrEnum):
    """Why a memory's summary is extractive rather than the model's."""

    NO_MODEL = "no_model"  # no summarizer model configured
    CONFIG = "config"  # authentication or configuration error: missing key, unknown model...
    UNREACHABLE = "unreachable"  # 429, 5xx, dropped connections past the retries
    TIMEOUT = "timeout"  # the model answered too slowly for LLM_TIMEOUT, even one exchange a call
    REFUSED = "refused"
    INVENTED = "invented"  # a fact in neither the user's lines nor the reply
    OTHER_USER = "other_user"  # another user's fact or words
    UNPARSEABLE = "unparseable"  # empty, or no summary to be found in the answer
    OFF_EXCHANGE = "off_exchange"  # about another exchange of the call or the context, not its own
    CUT = "cut"  # stopped before its first sentence ended (max_tokens)
    NOT_SMALLER = "not_smaller"  # summary and carried facts not smaller: the cleaned exchange is kept
    MISATTRIBUTED = "misattributed"  # one speaker's fact given to the other, or a question as a fact


_REFUSAL_RE = re.compile(
    r"^(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|as an ai\b|i can(?:no|')?t\b|i cannot\b"
    r"|i(?:'m| am) (?:not able|unable)|i won'?t\b|unfortunately,? i\b)",
    re.IGNORECASE,
)
# An answer with these faults is asked again, alone and without context, before going extractive.
_ASKED_AGAIN = frozenset(
    {
        FallbackReason.INVENTED,
        FallbackReason.OTHER_USER,
        FallbackReason.OFF_EXCHANGE,
        FallbackReason.CUT,
        FallbackReason.MISATTRIBUTED,
    }
)
_WORD_RE = re.compile(r"[^\W\d_](?:\w|['’-](?=[^\W\d_]))*")
# A quoted context line is cut to this many words: it explains the exchange, it is not remembered.
CONTEXT_WORDS = 40
# Another user's word in a summary is one that names something: long enough, and not everyday.
_OTHERS_WORD_MIN_CHARS = 4
_OTHERS_WORD_MAX_ZIPF = 5.0


@dataclass(frozen=True, slots=True)
class Quoted:
    """A line said before an exchange: who said it ("Alice (another user)"; empty for context given
    as plain text), and whether it is someone else's (another user's, or a reply to one)."""

    message_id: str
    speaker: str
    text: str
    other: bool


@dataclass(frozen=True, slots=True)
class ExchangeText:
    """One exchange as the summarizer reads it: its `Name: text` lines, the lines before it, and the
    names of its speakers."""

    text: str
    context: tuple[Quoted, ...] = ()
    names: tuple[str, ...] = ()
    message_ids: frozenset[str] = frozenset()
    owner: str = ""  # whose exchange it is: what another user's exchange in the same call is not


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str
    summarizer: str  # the model string, or "extractive"
    reason: FallbackReason | None = None  # why extractive (None: the model's summary)
    detail: str | None = None  # the failure in one line, for reports (a config error's fix)

    @property
    def extractive(self) -> bool:
        return self.summarizer == EXTRACTIVE


@dataclass(slots=True)
class _Item:
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
class _Verdict:
    summary: str
    reason: FallbackReason | None = None
    detail: str | None = None


def summary_token_cap(input_tokens: int, *, floor: int, ceiling: int) -> int:
    """min(ceiling, max(floor, input // 2)), and always below the input so a summary never grows it."""
    return max(1, min(ceiling, max(floor, input_tokens // 2), input_tokens - 1))


def _others_words(summary: str, item: _Item) -> list[str]:
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


class ExchangeSummarizer:
    """Summarize with an LLM when one is configured; fall back to the extractive summarizer."""

    def __init__(
        self,
        llm: LLMClient,
        *,
        max_tokens: int = 256,
        min_tokens: int = 48,
        input_tokens: int = 3000,
        batch_exchanges: int = BATCH_EXCHANGES,
    ) -> None:
        self._llm = llm
        self._max_tokens = max_tokens
        self._min_tokens = min_tokens
        self._input_tokens = input_tokens
        self._batch_exchanges = max(1, batch_exchanges)
        self.pace = BatchPace()  # public: stats name the models it asks one exchange a call
        self._logged: dict[tuple[str, FallbackReason], float] = {}

    async def summarize(
        self, text: str, *, cfg: ModelConfig | None, prompt: str | None = None, context: str = ""
    ) -> SummaryResult:
        """One exchange's summary, strictly shorter than `text`; never raises for LLM trouble."""
        quoted = (Quoted("", "", context, other=False),) if context.strip() else ()
        [result] = await self.summarize_exchanges([ExchangeText(text, quoted)], cfg=cfg, prompt=prompt)
        return result

    async def summarize_exchanges(
        self, exchanges: Sequence[ExchangeText], *, cfg: ModelConfig | None, prompt: str | None = None
    ) -> list[SummaryResult]:
        """A summary of each exchange, in order, strictly shorter than it; never raises for LLM trouble.

        Consecutive exchanges share calls, up to `batch_exchanges` and `input_tokens` a call.
        """
        items = [self._item(exchange) for exchange in exchanges]
        if cfg is None:
            return [self._fallback(item, FallbackReason.NO_MODEL, None, None) for item in items]
        batches: list[list[int]] = []
        size = 0
        for index, item in enumerate(items):
            # An exchange too long for one call goes alone (in chunks); so does the one after it.
            full = not batches or len(batches[-1]) >= self.pace.batch_size(cfg, self._batch_exchanges)
            if full or size + item.tokens > self._input_tokens:
                batches.append([index])
                size = item.tokens
            else:
                batches[-1].append(index)
                size += item.tokens
        done = await asyncio.gather(
            *(self._batch([items[i] for i in batch], cfg, prompt) for batch in batches)
        )
        results: list[SummaryResult | None] = [None] * len(items)
        for batch, batch_results in zip(batches, done, strict=True):
            for index, result in zip(batch, batch_results, strict=True):
                results[index] = result
        return [r for r in results if r is not None]

    def _item(self, exchange: ExchangeText) -> _Item:
        source = strip_chat_template_tokens(exchange.text)
        tokens = count_tokens(source)  # counted once: ~0.3 ms for an exchange of chat
        cap = summary_token_cap(tokens, floor=self._min_tokens, ceiling=self._max_tokens)
        return _Item(exchange, source, tokens, cap)

    async def _batch(self, items: list[_Item], cfg: ModelConfig, prompt: str | None) -> list[SummaryResult]:
        if len(items) == 1 and items[0].tokens > self._input_tokens:
            return [await self._chunked(items[0], cfg, prompt)]
        for item in items:
            item.neighbours = [o.source for o in items if o.exchange.owner != item.exchange.owner]
            item.elsewhere = [o.source for o in items if o is not item]
            item.elsewhere += [q.text for o in items for q in o.exchange.context]
            item.elsewhere += [EXAMPLE_EXCHANGES, EXAMPLE_ANSWER]  # copied from the prompt's example
        try:
            answers = await self._ask(items, cfg, prompt, strict=False)
        except LLMTimeoutError:
            # Too slow for this many at once: half as many a call (8, 4, 2, 1); only one exchange
            # alone is retried whole.
            half = (len(items) + 1) // 2
            parts = (items[:half], items[half:])
            halves = await asyncio.gather(*(self._batch(part, cfg, prompt) for part in parts))
            return [result for part in halves for result in part]
        except LLMConfigError as exc:
            return [self._fallback(item, FallbackReason.CONFIG, exc.reason, cfg) for item in items]
        except LLMUnavailableError as exc:
            slow = exc.reason.startswith("timed out")
            reason = FallbackReason.TIMEOUT if slow else FallbackReason.UNREACHABLE
            named = not slow or "LLM_TIMEOUT" in exc.reason
            detail = exc.reason if named else f"{exc.reason}; raise LLM_TIMEOUT for a slow model"
            return [self._fallback(item, reason, detail, cfg) for item in items]
        if len(items) > 1:
            self.pace.batch_answered(cfg, parsed=answers is not None)
        if answers is None:
            if len(items) == 1:
                return [self._fallback(items[0], FallbackReason.UNPARSEABLE, None, cfg)]
            # A malformed batch answer: each exchange on its own call.
            singles = await asyncio.gather(*(self._batch([item], cfg, prompt) for item in items))
            return [result for single in singles for result in single]
        verdicts = [self._judge(item, answer) for item, answer in zip(items, answers, strict=True)]
        again = [i for i, v in enumerate(verdicts) if v.reason in _ASKED_AGAIN]
        if again:
            # Asked again alone, without context: a wrong answer in a batch is often a neighbour's.
            groups = [[i] for i in again]
            retried = await asyncio.gather(
                *(self._ask_strictly([items[i] for i in g], cfg, prompt) for g in groups)
            )
            for group, answers in zip(groups, retried, strict=True):
                if answers is None:
                    continue  # unparseable or failed: the first reason stands
                for i, answer in zip(group, answers, strict=True):
                    verdict = self._judge(items[i], answer)
                    # Still wrong: the first reason stands (it is what the model did unasked).
                    verdicts[i] = verdict if verdict.reason is None else verdicts[i]
        return [
            SummaryResult(v.summary, cfg.model)
            if v.reason is None
            else self._fallback(item, v.reason, v.detail, cfg)
            for item, v in zip(items, verdicts, strict=True)
        ]

    async def _ask_strictly(
        self, items: list[_Item], cfg: ModelConfig, prompt: str | None
    ) -> list[str] | None:
        try:
            return await self._ask(items, cfg, prompt, strict=True)
        except (LLMConfigError, LLMUnavailableError):
            return None

    def _judge(self, item: _Item, answer: str) -> _Verdict:
        """The answer for one exchange as a summary to keep, or the reason it is not one."""
        cleaned = clean_answer(answer)
        if not cleaned:
            return _Verdict("", FallbackReason.UNPARSEABLE)
        if _REFUSAL_RE.match(cleaned):
            return _Verdict("", FallbackReason.REFUSED)
        summary = whole_sentences(cleaned)
        if not summary:
            return _Verdict("", FallbackReason.CUT, "no sentence ends")
        if len(summary) >= len(item.source):
            # Longer than what was said is no summary: keep what it said within the cap.
            summary = extractive_summary(summary, item.cap)
            if not summary or len(summary) >= len(item.source):
                return _Verdict("", FallbackReason.UNPARSEABLE)
        foreign = foreign_facts(summary, item.allowed, names=item.exchange.names)
        if foreign:
            # Another user's when every such fact is in their lines; a fact nobody said is invented.
            nobodys = set(foreign) & set(foreign_facts(summary, item.others, names=item.exchange.names))
            reason = FallbackReason.INVENTED if nobodys else FallbackReason.OTHER_USER
            return _Verdict(summary, reason, ", ".join(foreign))
        words = _others_words(summary, item)
        if words:
            return _Verdict(summary, FallbackReason.OTHER_USER, ", ".join(words))
        speakers = [name.casefold() for name in item.exchange.names]
        wrong = off_exchange(summary, item.source, item.elsewhere, speakers=speakers)
        if wrong is not None:
            return _Verdict(summary, FallbackReason.OFF_EXCHANGE, wrong)
        # Who said what: names and numbers can all be right and still be given to the wrong speaker.
        said = check_attribution(summary, exchange_lines(item.exchange.text, item.exchange.context))
        if said.others_claims:
            return _Verdict(summary, FallbackReason.OTHER_USER, said.detail())
        if said.wrong:
            return _Verdict(summary, FallbackReason.MISATTRIBUTED, said.detail())
        return _Verdict(summary)

    async def _ask(
        self, items: list[_Item], cfg: ModelConfig, prompt: str | None, *, strict: bool
    ) -> list[str] | None:
        """One call for `items`: their answers in order, or None when the answer cannot be parsed."""
        system = f"{prompt or DEFAULT_SUMMARIZER_PROMPT}\n\n{FORMAT_RULES}"
        if strict:
            system += f"\n\n{STRICT_RULE}"
        parts: list[str] = []
        quoted: set[str] = {i for item in items for i in item.exchange.message_ids}
        context: list[Quoted] = []
        for item in [] if strict else items:
            # Each line once, in the order said, and none that is an exchange of this call.
            context += [q for q in item.exchange.context if q.message_id not in quoted]
            quoted.update(q.message_id for q in item.exchange.context)
        if context:
            lines = "\n".join(f"> {_speaker(q)}{quoted_data(_cut(q.text))}" for q in context)
            parts.append(f"<context>\n{lines}\n</context>")
        for number, item in enumerate(items, start=1):
            words = max(5, int(item.cap * 0.7))
            parts.append(f'<exchange n="{number}" words="{words}">\n{quoted_data(item.source)}\n</exchange>')
        numbers = "[1]" if len(items) == 1 else f"[1] to [{len(items)}]"
        parts.append(f"Write memories {numbers}, each within its exchange's words.")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]
        max_tokens = sum(item.cap for item in items) + 8 * len(items)
        # A batch that times out is split rather than sent again whole (see _batch).
        single = len(items) == 1
        answer = await self._llm.complete(cfg, messages, max_tokens=max_tokens, retry_timeouts=single)
        return parse_numbered(answer, len(items))

    async def _chunked(self, item: _Item, cfg: ModelConfig, prompt: str | None) -> SummaryResult:
        """An exchange too long for one call: its chunks summarized, then the summaries summarized."""
        try:
            text = item.source
            while count_tokens(text) > self._input_tokens:
                chunks = split_into_chunks(text, self._input_tokens)
                partials = await asyncio.gather(
                    *(
                        self._ask([self._item(ExchangeText(chunk))], cfg, prompt, strict=False)
                        for chunk in chunks
                    )
                )
                combined = "\n".join(clean_summary_output(p[0]) for p in partials if p)
                if not combined or count_tokens(combined) >= count_tokens(text):
                    return self._fallback(item, FallbackReason.UNPARSEABLE, None, cfg)
                text = combined
            answers = await self._ask([self._item(ExchangeText(text))], cfg, prompt, strict=False)
        except LLMConfigError as exc:
            return self._fallback(item, FallbackReason.CONFIG, exc.reason, cfg)
        except LLMUnavailableError as exc:
            return self._fallback(item, FallbackReason.UNREACHABLE, exc.reason, cfg)
        if answers is None:
            return self._fallback(item, FallbackReason.UNPARSEABLE, None, cfg)
        verdict = self._judge(item, answers[0])
        if verdict.reason is not None:
            return self._fallback(item, verdict.reason, verdict.detail, cfg)
        return SummaryResult(verdict.summary, cfg.model)

    def _fallback(
        self, item: _Item, reason: FallbackReason, detail: str | None, cfg: ModelConfig | None
    ) -> SummaryResult:
        if cfg is not None:
            self._log_once(cfg.model, reason, detail)
            log.debug("Summarizer %s: %s (%s) for %.80r", cfg.model, reason.value, detail, item.source)
        return SummaryResult(self._extractive(item.source, item.cap), EXTRACTIVE, reason, detail)

    def _log_once(self, model: str, reason: FallbackReason, detail: str | None) -> None:
        """One line per reason now and then, not one per exchange (an import has thousands)."""
        now = time.monotonic()
        key = (model, reason)
        if now - self._logged.get(key, -LOG_EVERY_SECONDS) < LOG_EVERY_SECONDS:
            return
        self._logged[key] = now
        log.warning(
            "Summarizer %s: %s%s; using extractive summaries (logged once per %d min)",
            model,
            reason.value.replace("_", " "),
            f": {detail}" if detail else "",
            LOG_EVERY_SECONDS // 60,
        )

    def _extractive(self, source: str, cap: int) -> str:
        summary = extractive_summary(source, cap)
        if len(summary) >= len(source):
            # Already within budget: still strictly shorter, as the contract says.
            words = summary.split()
            summary = " ".join(words[: max(1, len(words) - 1)]) if len(words) > 1 else summary[:-1]
        return summary


def _cut(text: str) -> str:
    words = text.split()
    return text if len(words) <= CONTEXT_WORDS else " ".join(words[:CONTEXT_WORDS]) + " …"


def _speaker(line: Quoted) -> str:
    """How a quoted line names who said it (nothing, for context given as plain text)."""
    return f"{line.speaker}: " if line.speaker else ""
