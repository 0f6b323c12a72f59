"""The reset of a conversation (/memory reset, `personae memory reset`, the terminal's /reset): its
rolling summary and title cleared (memory.conversations.reset_conversation), and what the user said
there that is not yet a memory cancelled, so that no memory appears after a reset from words said
before it. Memories already formed stay: forgetting them is `/memory forget`.

The cancelling waits for the conversation's formation claim (memory.formation.forming), as unforming
does (memory.formation.steering): a pass summarizing those messages at that moment writes its memories
before the reset, never after it. It is taken first, before any row is touched, so that the pass's own
writes never wait on this transaction while it waits on the pass.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, exists, func, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from memory.conversations import Venue, find_conversation
from memory.conversations import reset_conversation as reset_summary
from memory.formation.forming import CLAIM_LOCK_SPACE
from memory.formation.repeats import FORGOTTEN
from models import Message


async def reset_conversation(session: AsyncSession, personality_id: int, venue: Venue) -> int:
    """Clear the conversation's rolling summary and title, and cancel the memories of the venue's user
    still pending there (see the module docstring); returns the summary rows removed."""
    conversation = await find_conversation(session, personality_id, venue)
    if conversation is None:
        return 0
    pending = (
        Message.conversation_id == conversation.id,
        Message.author_id == venue.user_id,
        Message.memory_processed_at.is_(None),
        Message.memory_excluded.is_(None),
    )
    # Nothing pending, no claim: a reset right after a reply must not hold back other users' exchanges.
    if await session.scalar(select(exists().where(*pending))):
        await session.execute(
            select(func.pg_advisory_xact_lock(literal(CLAIM_LOCK_SPACE + conversation.id, BigInteger)))
        )
        # The replies to them form nothing either: formation passes over replies to excluded lines.
        await session.execute(update(Message).where(*pending).values(memory_excluded=FORGOTTEN))
    return await reset_summary(session, personality_id, venue)
