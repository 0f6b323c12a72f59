"""Turn exchanges into memory summaries with the personality's LLM, or extractively without one.

Several exchanges of one conversation share a call: numbered in the request, numbered in the
answer, each answer parsed back to its own exchange and checked against its own user's lines; an
answer that cannot be parsed so is asked again one call per exchange (bar a refusal by a model that
refused all it was asked lately: memory.formation.pace). Earlier messages reach the
model only as quoted, attributed data between tags that the instruction calls data, never
instructions.

Every summary is checked before it is kept (memory.formation.judge): a refusal, an empty answer, or
a summary stating a name, number or date that neither the user's lines nor the reply hold (invented,
or another user's) is rejected. A summary with facts of its own is asked once more with a stricter
instruction and no context; then the extractive summary takes its place. Each result says how it was
made: by the model, or extractive and why (`FallbackReason`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Sequence

from memory.formation.answers import parse_numbered, quoted_data
from memory.formation.chunking import split_into_chunks
from memory.formation.cleaning import clean_summary_output, strip_chat_template_tokens
from memory.formation.extractive import extractive_summary
from memory.formation.judge import ASKED_AGAIN, Asked, is_refusal, judge_answer
from memory.formation.pace import PROBE_EXCHANGES, PROBE_SHARE, PROBES_AT_ONCE, BatchPace
from memory.formation.summarizer_prompt import (
    DEFAULT_SUMMARIZER_PROMPT,
    EXAMPLE_ANSWER,
    EXAMPLE_EXCHANGES,
    FORMAT_RULES,
    FORMAT_RULES_ONE,
    STRICT_RULE,
)
from memory.formation.summary_types import (
    EXTRACTIVE,
    ExchangeText,
    FallbackReason,
    Quoted,
    SummaryResult,
)
from memory.llm import LLMClient, LLMConfigError, LLMTimeoutError, LLMUnavailableError
from memory.tokens import count_tokens
from memory.types import ModelConfig, ProgressCallback

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

# Exchanges summarized in one call: the instruction is paid once per batch, not once per exchange.
BATCH_EXCHANGES = 8
# A fallback reason is logged once in this many seconds, not once per exchange.
LOG_EVERY_SECONDS = 600.0
# A quoted context line is cut to this many words: it explains the exchange, it is not remembered.
CONTEXT_WORDS = 40


def summary_token_cap(input_tokens: int, *, floor: int, ceiling: int) -> int:
    """min(ceiling, max(floor, input // 2)), and always below the input so a summary never grows it."""
    return max(1, min(ceiling, max(floor, input_tokens // 2), input_tokens - 1))


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
        self,
        exchanges: Sequence[ExchangeText],
        *,
        cfg: ModelConfig | None,
        prompt: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> list[SummaryResult]:
        """A summary of each exchange, in order, strictly shorter than it; never raises for LLM trouble.

        Consecutive exchanges share calls, up to `batch_exchanges` and `input_tokens` a call.
        `progress` is told how many exchanges each call settled, as it settles them: a slow local
        model's first memories show long before the last call of the batch answers.
        """
        items = [self._item(exchange) for exchange in exchanges]
        if cfg is None:
            return _settled(progress, [self._fallback(i, FallbackReason.NO_MODEL, None, None) for i in items])
        batches: list[list[int]] = []
        size = 0
        for index, item in enumerate(items):
            # An exchange too long for one call goes alone (in chunks); so does the one after it.
            full = not batches or len(batches[-1]) >= self._batch_exchanges
            if full or size + item.tokens > self._input_tokens:
                batches.append([index])
                size = item.tokens
            else:
                batches[-1].append(index)
                size += item.tokens
        probe = self._probe_pays(items, cfg, prompt)
        done = await asyncio.gather(
            *(self._paced([items[i] for i in batch], cfg, prompt, progress, probe) for batch in batches)
        )
        results: list[SummaryResult | None] = [None] * len(items)
        for batch, batch_results in zip(batches, done, strict=True):
            for index, result in zip(batch, batch_results, strict=True):
                results[index] = result
        return [r for r in results if r is not None]

    def _probe_pays(self, items: list[Asked], cfg: ModelConfig, prompt: str | None) -> bool:
        """Whether the probes of a model not yet known to number its answers would cost at most
        PROBE_SHARE of asking these exchanges one a call: unparsed, a probe is paid for nothing, so a
        handful of exchanges (a two-user channel's four) is asked one a call rather than probed."""
        head = prompt or DEFAULT_SUMMARIZER_PROMPT
        one, many = _tokens_of(f"{head}\n\n{FORMAT_RULES_ONE}"), _tokens_of(f"{head}\n\n{FORMAT_RULES}")
        alone = sum(one + item.tokens + item.cap for item in items)
        shortest = sorted(item.tokens + item.cap for item in items)[:PROBE_EXCHANGES]
        probes = max(1, min(PROBES_AT_ONCE, self._llm.limit_for(cfg.provider, cfg.api_base).level))
        return probes * (many + sum(shortest)) <= PROBE_SHARE * alone

    def _item(self, exchange: ExchangeText) -> Asked:
        source = strip_chat_template_tokens(exchange.text)
        tokens = count_tokens(source)  # counted once: ~0.3 ms for an exchange of chat
        cap = summary_token_cap(tokens, floor=self._min_tokens, ceiling=self._max_tokens)
        return Asked(exchange, source, tokens, cap)

    async def _paced(
        self,
        items: list[Asked],
        cfg: ModelConfig,
        prompt: str | None,
        progress: ProgressCallback | None,
        probe: bool,
    ) -> list[SummaryResult]:
        """The items' summaries in as many calls as the model's pace allows (memory.formation.pace):
        a model not yet known to answer numbered batches gets probes of a few exchanges first, where
        a `probe` pays, and one exchange a call where it does not."""
        done: dict[int, SummaryResult] = {}
        left = list(range(len(items)))
        while len(left) > 1:
            # Probes in flight beyond what the endpoint serves at once would only queue there.
            serves = self._llm.limit_for(cfg.provider, cfg.api_base).level
            async with self.pace.batch_turn(cfg, len(left), serves=serves, probe=probe) as size:
                if size > 1:
                    # A probe holds the shortest exchanges: unparsed, it is paid for nothing.
                    chosen = sorted(sorted(left, key=lambda i: items[i].tokens)[:size])
                    answered = await self._batch([items[i] for i in chosen], cfg, prompt, progress)
                    done.update(zip(chosen, answered, strict=True))
                    left = [i for i in left if i not in done]
                    continue
            # Asked one exchange per call: all at once, as the concurrency limit allows.
            singles = await asyncio.gather(*(self._batch([items[i]], cfg, prompt, progress) for i in left))
            done.update((i, result) for i, single in zip(left, singles, strict=True) for result in single)
            left = []
        for i in left:
            [done[i]] = await self._batch([items[i]], cfg, prompt, progress)
        return [done[i] for i in range(len(items))]

    async def _batch(
        self, items: list[Asked], cfg: ModelConfig, prompt: str | None, progress: ProgressCallback | None
    ) -> list[SummaryResult]:
        """The items' summaries; each exchange is told to `progress` once, when its result is final."""
        if len(items) == 1 and items[0].tokens > self._input_tokens:
            return _settled(progress, [await self._chunked(items[0], cfg, prompt)])
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
            halves = await asyncio.gather(*(self._batch(part, cfg, prompt, progress) for part in parts))
            return [result for part in halves for result in part]
        except LLMConfigError as exc:
            return _settled(
                progress, [self._fallback(item, FallbackReason.CONFIG, exc.reason, cfg) for item in items]
            )
        except LLMUnavailableError as exc:
            slow = exc.reason.startswith("timed out")
            reason = FallbackReason.TIMEOUT if slow else FallbackReason.UNREACHABLE
            named = not slow or "LLM_TIMEOUT" in exc.reason
            detail = exc.reason if named else f"{exc.reason}; raise LLM_TIMEOUT for a slow model"
            return _settled(progress, [self._fallback(item, reason, detail, cfg) for item in items])
        if answers is None:
            if len(items) == 1:
                return _settled(progress, [self._fallback(items[0], FallbackReason.UNPARSEABLE, None, cfg)])
            # A malformed batch answer: each exchange on its own call, one after another: a model that
            # cannot number its answers often cannot answer at all, and the retry record
            # (memory.formation.pace) learns so from the first exchanges before the next are paid for.
            return [result for item in items for result in await self._batch([item], cfg, prompt, progress)]
        verdicts = [judge_answer(item, answer) for item, answer in zip(items, answers, strict=True)]
        for verdict in verdicts:
            self.pace.answered(cfg, refused=verdict.reason is FallbackReason.REFUSED)
        again = [i for i, v in enumerate(verdicts) if v.reason in ASKED_AGAIN]
        if again:
            # The answers kept are settled now; the others as each is asked again (or not).
            _tell(progress, len(items) - len(again))

            async def ask_again(i: int) -> None:
                # Asked again only while this model's retries are kept now and then.
                if self.pace.retry_worth_it(cfg):
                    # Alone, without context: a wrong answer in a batch is often a neighbour's.
                    answers = await self._ask_strictly([items[i]], cfg, prompt)
                    if answers is not None:  # else unparseable or failed: the first reason stands
                        verdict = judge_answer(items[i], answers[0])
                        # Still wrong: the first reason stands (it is what the model did unasked).
                        verdicts[i] = verdict if verdict.reason is None else verdicts[i]
                    self.pace.retried(cfg, kept=verdicts[i].reason is None)
                _tell(progress, 1)

            if self.pace.retries_in_doubt(cfg):
                for i in again:  # one after another, so that each retry's outcome counts for the next
                    await ask_again(i)
            else:
                await asyncio.gather(*(ask_again(i) for i in again))
        results = [
            SummaryResult(v.summary, cfg.model)
            if v.reason is None
            else self._fallback(item, v.reason, v.detail, cfg)
            for item, v in zip(items, verdicts, strict=True)
        ]
        if not again:
            _tell(progress, len(results))
        return results

    async def _ask_strictly(
        self, items: list[Asked], cfg: ModelConfig, prompt: str | None
    ) -> list[str] | None:
        try:
            return await self._ask(items, cfg, prompt, strict=True)
        except (LLMConfigError, LLMUnavailableError):
            return None

    async def _ask(
        self, items: list[Asked], cfg: ModelConfig, prompt: str | None, *, strict: bool
    ) -> list[str] | None:
        """One call for `items`: their answers in order, or None when the answer cannot be parsed."""
        rules = FORMAT_RULES if len(items) > 1 else FORMAT_RULES_ONE
        system = f"{prompt or DEFAULT_SUMMARIZER_PROMPT}\n\n{rules}"
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
        parsed = parse_numbered(answer, len(items))
        if parsed is None and not single and is_refusal(answer):
            # A refusal says nothing of whether the model can number its answers.
            self.pace.answered(cfg, refused=True)
            if self.pace.refuses(cfg):
                # A model that refused all it was asked lately: its refusal of the batch is each
                # exchange's, not a reason to pay for every exchange again alone.
                self.pace.batch_answered(cfg, parsed=True)
                return [answer] * len(items)
        elif not single:
            self.pace.batch_answered(cfg, parsed=parsed is not None)
        return parsed

    async def _chunked(self, item: Asked, cfg: ModelConfig, prompt: str | None) -> SummaryResult:
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
        verdict = judge_answer(item, answers[0])
        if verdict.reason is not None:
            return self._fallback(item, verdict.reason, verdict.detail, cfg)
        return SummaryResult(verdict.summary, cfg.model)

    def _fallback(
        self, item: Asked, reason: FallbackReason, detail: str | None, cfg: ModelConfig | None
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


@functools.lru_cache(maxsize=16)
def _tokens_of(text: str) -> int:
    return count_tokens(text)


def _cut(text: str) -> str:
    words = text.split()
    return text if len(words) <= CONTEXT_WORDS else " ".join(words[:CONTEXT_WORDS]) + " …"


def _speaker(line: Quoted) -> str:
    """How a quoted line names who said it (nothing, for context given as plain text)."""
    return f"{line.speaker}: " if line.speaker else ""


def _settled(progress: ProgressCallback | None, results: list[SummaryResult]) -> list[SummaryResult]:
    """`results`, told to `progress` as exchanges settled."""
    _tell(progress, len(results))
    return results


def _tell(progress: ProgressCallback | None, settled: int) -> None:
    if progress is not None and settled:
        progress(settled)
