"""After a reply, once it is delivered: form memories of the new exchanges, then update the rolling
summary.

A failure here never reaches the user who was answered: nothing is marked done, so the next reply or
the catch-up pass (the chat cog's timer, or `personae worker`) forms what was left.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import selectinload

from memory.chat.rolling import RollingSummarizer, SummaryUpdate
from memory.owners.model_configs import ModelConfigResolver
from models import Conversation, Personality

if TYPE_CHECKING:  # the memory service pulls in the vector index and embedder
    from memory.service import MemoryService

log = logging.getLogger(__name__)


@dataclass(slots=True)
class AfterReplyReport:
    """What the work after a reply did: whose messages are now remembered, and the summary update."""

    remembered_message_ids: list[str] = field(default_factory=list)
    summary: SummaryUpdate | None = None


class AfterReplyWork:
    """Memory formation and the rolling summary of one conversation, run after each reply."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        models: ModelConfigResolver,
        memory: MemoryService,
        rolling: RollingSummarizer,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._models = models
        self._memory = memory
        self._rolling = rolling

    async def run(self, conversation_id: int) -> AfterReplyReport:
        """Form memories of the conversation's complete exchanges, then update its summary if due."""
        report = AfterReplyReport()
        try:
            formed = await self._memory.form_pending(conversation_id=conversation_id)
        except Exception:
            log.exception("Memory formation failed for conversation %s; will retry", conversation_id)
        else:
            report.remembered_message_ids = formed.remembered_message_ids
        try:
            report.summary = await self.update_summary(conversation_id)
        except Exception:
            log.exception("The rolling summary of conversation %s failed; will retry", conversation_id)
        return report

    async def update_summary(self, conversation_id: int) -> SummaryUpdate | None:
        """The rolling summary (and title) updated with the personality's summarizer, when due."""
        async with self._sessionmaker() as session:
            personality = await session.scalar(
                select(Personality)
                .join(Conversation, Conversation.personality_id == Personality.id)
                .where(Conversation.id == conversation_id)
                .options(selectinload(Personality.summarizer_llm_config))
            )
        if personality is None:
            return None
        cfg = self._models.summarizer(personality)
        # The latest reply stays out of the summary while it can still be regenerated.
        return await self._rolling.maybe_update(
            conversation_id, cfg=cfg, personality_name=personality.display_name, settled_only=True
        )
