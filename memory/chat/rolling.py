"""Rolling conversation summaries and titles, updated after replies, off the chat path.

Once the tokens since the last summary pass a threshold and enough new messages arrived, the latest
summary is updated cumulatively (previous summary plus the new messages, the most recent kept when
the input must be cut). Once a summary passes its maximum size, a new row starts. Each row records
the message range it covers. The summary is computed first and written in one short transaction that
checks nothing moved meanwhile, so an interrupted or raced run leaves the previous summary intact.

After a reply (`settled_only`), the conversation's latest reply and what came from the message it
answers on are left for the next update: that reply can still be regenerated (memory.chat.regenerate),
and a summary must only ever hold the answer that stays. The prompt has those messages in its recent
history anyway, so the summary loses nothing by lagging one exchange behind.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.refused import not_refused
from memory.formation.cleaning import clean_summary_output
from memory.formation.exchanges import render_lines
from memory.formation.extractive import extractive_summary
from memory.formation.summarizer import EXTRACTIVE
from memory.llm import LLMClient, LLMConfigError, LLMUnavailableError
from memory.settings import Settings
from memory.tokens import count_tokens, truncate_to_tokens
from memory.types import MessageRole, ModelConfig
from models import Conversation, Message, Summary

log = logging.getLogger(__name__)

SUMMARY_PROMPT = """\
You keep a running summary of a chat between {personality} and the people talking to it.
Write in the third person, in plain sentences, paraphrasing. Keep names, facts, decisions, plans,
dates and open questions; drop greetings, filler and roleplay formatting. Output only the summary."""

TITLE_PROMPT = """\
Give this conversation a short title of at most six words, without quotes or a trailing period.
Output only the title."""

MAX_TITLE_CHARS = 80


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    summary_id: int
    created: bool
    first_message_id: int
    last_message_id: int
    message_count: int
    token_count: int
    summarizer: str
    title: str | None


def _keep_recent_lines(text: str, max_tokens: int) -> str:
    """The most recent whole lines of text within `max_tokens`: a line cut short would lose its speaker."""
    kept = truncate_to_tokens(text, max_tokens, keep_end=True)
    if kept == text or text.endswith("\n" + kept):
        return kept
    return kept.partition("\n")[2]


def settled(messages: Sequence[Message]) -> list[Message]:
    """`messages` (oldest first) before the latest reply's message: that reply may still be replaced."""
    replies = [m for m in messages if m.role == MessageRole.ASSISTANT.value]
    if not replies:
        return list(messages)
    latest = replies[-1]
    bound = min(latest.id, latest.reply_to_id or latest.id)
    return [m for m in messages if m.id < bound]


def fallback_title(summary: str) -> str:
    """A title from the summary's first words, for when no LLM is available."""
    first = summary.strip().split("\n", 1)[0]
    for mark in ".!?":
        first = first.split(mark, 1)[0]
    words = first.split()[:8]
    title = " ".join(words)
    return (title[: MAX_TITLE_CHARS - 1] + "…") if len(title) > MAX_TITLE_CHARS else title


class RollingSummarizer:
    """Decides when a conversation's rolling summary is due and updates it atomically."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        llm: LLMClient | None,
        *,
        threshold_tokens: int = 1500,
        min_messages: int = 6,
        max_tokens: int = 800,
        input_tokens: int = 3000,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._llm = llm
        self.threshold_tokens = threshold_tokens
        self.min_messages = min_messages
        self.max_tokens = max_tokens
        self.input_tokens = input_tokens

    @classmethod
    def from_settings(
        cls, sessionmaker: async_sessionmaker[AsyncSession], llm: LLMClient, settings: Settings
    ) -> RollingSummarizer:
        """The deployment's rolling summarizer: its thresholds and sizes as the settings give them."""
        return cls(
            sessionmaker,
            llm,
            threshold_tokens=settings.rolling_summary_threshold_tokens,
            min_messages=settings.rolling_summary_min_messages,
            max_tokens=settings.rolling_summary_max_tokens,
            input_tokens=settings.summarizer_input_tokens,
        )

    async def maybe_update(
        self,
        conversation_id: int,
        *,
        cfg: ModelConfig | None,
        personality_name: str = "the character",
        settled_only: bool = False,
    ) -> SummaryUpdate | None:
        """Update the rolling summary if it is due; None when not due or when someone else moved first.
        settled_only: leave out the latest reply and what came from its message on (see the module doc)."""
        async with self._sessionmaker() as session:
            latest = await _latest(session, conversation_id)
            after = latest.last_message_id if latest is not None else 0
            new = (
                await session.scalars(
                    select(Message)
                    .where(Message.conversation_id == conversation_id, Message.id > after, not_refused())
                    .order_by(Message.id)
                )
            ).all()
        if settled_only:
            new = settled(new)
        if len(new) < self.min_messages:
            return None
        tokens = sum(m.token_count or count_tokens(m.content) for m in new)
        if tokens < self.threshold_tokens:
            return None
        cumulative = latest is not None and latest.token_count < self.max_tokens
        previous = latest.content if cumulative and latest is not None else None
        transcript = _keep_recent_lines(
            render_lines(new, personality_name=personality_name, one_line=True), self.input_tokens
        )
        content, summarizer = await self._summarize(previous, transcript, cfg, personality_name)
        if not content:
            return None
        token_count = count_tokens(content)
        title = await self._title(content, cfg)
        first_id, last_id = new[0].id, new[-1].id
        async with self._sessionmaker.begin() as session:
            # Written only if nothing moved since we read: a concurrent pass or a reset wins.
            current = await _latest(session, conversation_id)
            current_last = current.last_message_id if current is not None else 0
            if current_last != after or (current is None) != (latest is None):
                return None
            # A cumulative summary grows its row, which keeps its first message; otherwise a row starts.
            grown = current if cumulative else None
            if grown is not None:
                first_id = grown.first_message_id
            count = len(new) + (grown.message_count if grown is not None else 0)
            written = {
                "content": content,
                "token_count": token_count,
                "last_message_id": last_id,
                "message_count": count,
                "summarizer": summarizer,
            }
            if grown is not None:
                await session.execute(update(Summary).where(Summary.id == grown.id).values(**written))
                row_id, created = grown.id, False
            else:
                row = Summary(conversation_id=conversation_id, first_message_id=first_id, **written)
                session.add(row)
                await session.flush()
                row_id, created = row.id, True
            if title:
                # Written only when it changes: the UPDATE locks the conversation row until commit.
                await session.execute(
                    update(Conversation)
                    .where(Conversation.id == conversation_id, Conversation.title.is_distinct_from(title))
                    .values(title=title)
                )
        return SummaryUpdate(row_id, created, first_id, last_id, count, token_count, summarizer, title)

    async def _summarize(
        self, previous: str | None, transcript: str, cfg: ModelConfig | None, personality_name: str
    ) -> tuple[str, str]:
        source = (f"Previous summary:\n{previous}\n\nNew messages:\n" if previous else "") + transcript
        if cfg is not None and self._llm is not None:
            task = (
                "Update the previous summary with the new messages into one summary."
                if previous
                else "Summarize these messages."
            )
            messages = [
                {"role": "system", "content": SUMMARY_PROMPT.format(personality=personality_name)},
                {"role": "user", "content": f"{source}\n\n{task} At most {self.max_tokens * 3 // 4} words."},
            ]
            try:
                text = clean_summary_output(
                    await self._llm.complete(cfg, messages, max_tokens=self.max_tokens)
                )
            except (LLMUnavailableError, LLMConfigError) as exc:
                log.warning("Rolling summary via %s failed, using the extractive summary: %s", cfg.model, exc)
            else:
                if text:
                    return text, cfg.model
        text = ((previous + "\n") if previous else "") + transcript
        return extractive_summary(text, self.max_tokens), EXTRACTIVE

    async def _title(self, summary: str, cfg: ModelConfig | None) -> str:
        if cfg is not None and self._llm is not None:
            messages = [
                {"role": "system", "content": TITLE_PROMPT},
                {"role": "user", "content": summary},
            ]
            try:
                title = clean_summary_output(await self._llm.complete(cfg, messages, max_tokens=24))
            except (LLMUnavailableError, LLMConfigError) as exc:
                log.warning("Title via %s failed: %s", cfg.model, exc)
            else:
                title = " ".join(title.split()).strip("\"'“”.")
                if title:
                    return title[:MAX_TITLE_CHARS]
        return fallback_title(summary)


async def _latest(session: AsyncSession, conversation_id: int) -> Summary | None:
    return await session.scalar(
        select(Summary).where(Summary.conversation_id == conversation_id).order_by(Summary.id.desc()).limit(1)
    )


async def summary_text(session: AsyncSession, conversation_id: int, *, rows: int = 2) -> str | None:
    """The newest summary rows (oldest first) as one text, for the prompt; None without a summary."""
    found = (
        await session.scalars(
            select(Summary)
            .where(Summary.conversation_id == conversation_id)
            .order_by(Summary.id.desc())
            .limit(rows)
        )
    ).all()
    if not found:
        return None
    return "\n\n".join(s.content for s in reversed(found))
