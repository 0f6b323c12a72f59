"""Turn an exchange into a memory summary with the personality's LLM, or extractively without one."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from memory.formation.cleaning import clean_summary_output, strip_chat_template_tokens
from memory.formation.extractive import extractive_summary
from memory.llm import LLMClient, LLMConfigError, LLMUnavailableError
from memory.tokens import count_tokens
from memory.types import ModelConfig

log = logging.getLogger(__name__)

EXTRACTIVE = "extractive"

DEFAULT_SUMMARIZER_PROMPT = """\
You turn one exchange of a chat with a roleplay character into a long-term memory for that character.

Write the memory:
- in the third person, naming the people ("Alice told Lilith that...", never "I" or "you");
- keeping every name, date, time, number, place, event and plan, and the feelings that matter;
- dropping roleplay formatting (*actions*, emoji, emoticons, repeated punctuation), greetings and filler;
- in one to three plain sentences, with no preamble, labels, quotes or lists.

Earlier messages are context only: remember only the exchange itself."""


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str
    summarizer: str  # the model string, or "extractive"

    @property
    def extractive(self) -> bool:
        return self.summarizer == EXTRACTIVE


def summary_token_cap(input_tokens: int, *, floor: int, ceiling: int) -> int:
    """min(ceiling, max(floor, input // 2)), and always below the input so a summary never grows it."""
    return max(1, min(ceiling, max(floor, input_tokens // 2), input_tokens - 1))


def split_into_chunks(text: str, max_tokens: int, count: Callable[[str], int] = count_tokens) -> list[str]:
    """Cut text at line, then sentence, then word boundaries into pieces of at most max_tokens.

    Nothing is dropped or reordered: joining the pieces' words gives the text's words. Only a single
    word longer than max_tokens makes a piece over budget.
    """
    pieces: list[str] = []
    for line in text.splitlines():
        if count(line) <= max_tokens:
            pieces.append(line)
            continue
        for sentence in re.split(r"(?<=[.!?])\s+", line):
            if count(sentence) <= max_tokens:
                pieces.append(sentence)
            else:
                pieces.extend(_pack(sentence.split(), max_tokens, " ", count))
    return [chunk for chunk in _pack(pieces, max_tokens, "\n", count) if chunk.strip()]


def _pack(parts: list[str], max_tokens: int, separator: str, count: Callable[[str], int]) -> list[str]:
    """Consecutive parts joined by separator into runs of at most max_tokens."""
    runs: list[str] = []
    current: list[str] = []
    size = 0
    for part in parts:
        tokens = count(part)
        # The separator costs a token: token counts do not add up exactly across a join.
        if current and size + 1 + tokens > max_tokens:
            runs.append(separator.join(current))
            current, size = [], 0
        size += tokens + (1 if current else 0)
        current.append(part)
    if current:
        runs.append(separator.join(current))
    return runs


class ExchangeSummarizer:
    """Summarize with an LLM when one is configured; fall back to the extractive summarizer."""

    def __init__(
        self,
        llm: LLMClient,
        *,
        max_tokens: int = 256,
        min_tokens: int = 48,
        input_tokens: int = 3000,
    ) -> None:
        self._llm = llm
        self._max_tokens = max_tokens
        self._min_tokens = min_tokens
        self._input_tokens = input_tokens

    async def summarize(
        self, text: str, *, cfg: ModelConfig | None, prompt: str | None = None, context: str = ""
    ) -> SummaryResult:
        """A summary strictly shorter than `text`; never raises for LLM trouble."""
        source = strip_chat_template_tokens(text)
        tokens = count_tokens(source)  # counted once: ~0.3 ms for an exchange of chat
        cap = summary_token_cap(tokens, floor=self._min_tokens, ceiling=self._max_tokens)
        if cfg is None:
            return SummaryResult(self._extractive(source, cap), EXTRACTIVE)
        try:
            summary = await self._summarize_llm(
                source, cfg, prompt, strip_chat_template_tokens(context), cap, tokens
            )
        except (LLMUnavailableError, LLMConfigError) as exc:
            log.warning("Summarizer %s unavailable, using the extractive summary: %s", cfg.model, exc)
            return SummaryResult(self._extractive(source, cap), EXTRACTIVE)
        if not summary or len(summary) >= len(source):
            # An empty or longer answer is no summary: keep what it said within the cap.
            summary = extractive_summary(summary, cap) if summary else ""
            if not summary or len(summary) >= len(source):
                return SummaryResult(self._extractive(source, cap), EXTRACTIVE)
        return SummaryResult(summary, cfg.model)

    def _extractive(self, source: str, cap: int) -> str:
        summary = extractive_summary(source, cap)
        if len(summary) >= len(source):
            # Already within budget: still strictly shorter, as the contract says.
            words = summary.split()
            summary = " ".join(words[: max(1, len(words) - 1)]) if len(words) > 1 else summary[:-1]
        return summary

    async def _summarize_llm(
        self, source: str, cfg: ModelConfig, prompt: str | None, context: str, cap: int, tokens: int
    ) -> str:
        if tokens <= self._input_tokens:
            return await self._call(source, cfg, prompt, context, cap)
        # Too long for one call: summarize chunks, then the summaries, never truncating silently.
        chunks = split_into_chunks(source, self._input_tokens)
        partials = []
        for chunk in chunks:
            chunk_cap = summary_token_cap(
                count_tokens(chunk), floor=self._min_tokens, ceiling=self._max_tokens
            )
            partials.append(await self._call(chunk, cfg, prompt, context, chunk_cap))
        combined = "\n".join(p for p in partials if p)
        if count_tokens(combined) >= tokens:
            combined = self._extractive(combined, cap)
        return (
            await self._summarize_llm(combined, cfg, prompt, "", cap, count_tokens(combined))
            if combined
            else ""
        )

    async def _call(self, text: str, cfg: ModelConfig, prompt: str | None, context: str, cap: int) -> str:
        words = max(5, int(cap * 0.7))
        user = (
            f"Earlier messages (context only):\n{context}\n\n" if context else ""
        ) + f"Exchange to remember:\n{text}\n\nWrite the memory in at most {words} words."
        messages = [
            {"role": "system", "content": prompt or DEFAULT_SUMMARIZER_PROMPT},
            {"role": "user", "content": user},
        ]
        return clean_summary_output(await self._llm.complete(cfg, messages, max_tokens=cap))
