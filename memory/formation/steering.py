"""A user steering the memory of one exchange by a message of it: remember it now, pinned, or forget it.

A message (a Discord id, `messages.external_id`) leads to its exchange in the log: the user message,
the replies that answer it, and whatever else the memories formed from them hold (the author's
earlier unanswered lines). The exchange is its user message's author's: only they may steer it.
Unforming forgets the exchange's memories through the store's one forget path, and either excludes
its messages for good ("Forget this": formation never forms them again) or makes them pending, to be
formed anew (a regenerated reply). Both hold the conversation's formation claim, so no pass forming
the exchange at that moment can write its memory after it was forgotten.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field

from sqlalchemy import BigInteger, and_, delete, func, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memory.conversations import INCOGNITO
from memory.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memory.formation.corrections import pin_rows
from memory.formation.forgotten import FORGOTTEN_CLAIM, clear_claims, memory_claims, remember_claims
from memory.formation.forming import CLAIM_LOCK_SPACE, FormationReport
from memory.formation.pending import cancel_pending
from memory.formation.repeats import FORGOTTEN
from memory.recall.store import MemoryStore, forget_rows
from memory.types import MemoryState, MessageRole
from models import Conversation, ForgottenClaim, Memory, Message

# "Remember this" forms at once; a pass of this process already forming the conversation finishes
# the exchange itself, so it is looked at again a few times before the user is asked to retry.
FORM_ATTEMPTS = 20
FORM_RETRY_SECONDS = 0.25

NOT_LOGGED = "I have no record of that message: only messages I answered, and my replies, can be remembered."
NOT_YOURS = "That's not your memory."
NO_OWNER = "That reply answers no message I logged, so it is nobody's memory."

FormConversation = Callable[[int], Awaitable[FormationReport]]


@dataclass(frozen=True, slots=True)
class LoggedExchange:
    """A message's exchange in one conversation: whose it is, its messages, what keeps it from memory."""

    conversation_id: int
    owner_id: str | None  # None: a reply that answers no logged message
    message_ids: frozenset[str]
    answered: bool
    excluded: frozenset[str]  # the memory_excluded values among its messages


@dataclass
class RememberReport:
    """What "Remember this" did: memories pinned, and the messages formation just remembered."""

    pinned: int = 0
    remembered_message_ids: list[str] = field(default_factory=list)


async def exchange_rows(
    session: AsyncSession, conversation_id: int, external_ids: Collection[str]
) -> list[Message]:
    """The logged messages of these messages' exchanges (see the module docstring), oldest first."""
    in_conversation = Message.conversation_id == conversation_id
    given = (
        await session.scalars(
            select(Message).where(in_conversation, Message.external_id.in_(sorted(external_ids)))
        )
    ).all()
    users = {m.id for m in given if m.role == MessageRole.USER.value}
    users.update(m.reply_to_id for m in given if m.reply_to_id is not None)
    rows = {m.id: m for m in given}
    if users:
        linked = select(Message).where(
            in_conversation, or_(Message.id.in_(users), Message.reply_to_id.in_(users))
        )
        rows.update((m.id, m) for m in (await session.scalars(linked)).all())
    known = {m.external_id for m in rows.values()}
    sources = (
        await session.scalars(
            select(func.unnest(Memory.source_message_ids)).where(
                Memory.conversation_id == conversation_id, Memory.source_message_ids.overlap(sorted(known))
            )
        )
    ).all()
    if more := set(sources) - known:
        extra = select(Message).where(in_conversation, Message.external_id.in_(sorted(more)))
        rows.update((m.id, m) for m in (await session.scalars(extra)).all())
    return [rows[i] for i in sorted(rows)]


async def logged_exchanges(
    session: AsyncSession, message_id: str, channel_id: str | None
) -> list[LoggedExchange]:
    """The exchanges a message is part of, in each conversation of its channel that logged it."""
    found = select(Message.conversation_id).join(Conversation).where(Message.external_id == message_id)
    if channel_id is not None:
        found = found.where(Conversation.channel_id == channel_id)
    exchanges = []
    for conversation_id in (await session.scalars(found.order_by(Message.conversation_id))).all():
        rows = await exchange_rows(session, conversation_id, [message_id])
        users = [m for m in rows if m.role == MessageRole.USER.value]
        target = next((m for m in rows if m.external_id == message_id), None)
        if target is not None and target.role == MessageRole.USER.value:
            owner: str | None = target.author_id
        else:
            answered = target.reply_to_id if target is not None else None
            owner = next((m.author_id for m in users if m.id == answered), None)
        exchanges.append(
            LoggedExchange(
                conversation_id=conversation_id,
                owner_id=owner,
                message_ids=frozenset(m.external_id for m in rows),
                answered=any(
                    m.role == MessageRole.ASSISTANT.value and m.reply_to_id is not None for m in rows
                ),
                excluded=frozenset(m.memory_excluded for m in rows if m.memory_excluded is not None),
            )
        )
    return exchanges


async def _claim(session: AsyncSession, conversation_id: int) -> None:
    """Wait for, then hold until commit, the conversation's formation claim (memory.formation.forming)."""
    await session.execute(
        select(func.pg_advisory_xact_lock(literal(CLAIM_LOCK_SPACE + conversation_id, BigInteger)))
    )


async def unform(
    store: MemoryStore, *, conversation_id: int, external_ids: Collection[str], exclude: bool
) -> int:
    """Forget every live memory formed from these messages' exchanges; returns how many.

    exclude: the exchanges' messages are marked forgotten and processed, never formed again (an
    incognito mark stays as it is), and what the memories claimed is recorded so that it does not
    come back in other words (memory.formation.forgotten). Otherwise they are pending again, and
    the memories' rows go without a tombstone, so formation forms the exchanges anew.
    """
    async with store.sessionmaker.begin() as session:
        await _claim(session, conversation_id)
        rows = await exchange_rows(session, conversation_id, external_ids)
        ids = sorted({m.external_id for m in rows})
        if not ids:
            return 0
        marked = update(Message).where(
            Message.conversation_id == conversation_id, Message.external_id.in_(ids)
        )
        if exclude:
            await session.execute(
                marked.values(
                    memory_excluded=func.coalesce(Message.memory_excluded, FORGOTTEN),
                    memory_processed_at=func.coalesce(Message.memory_processed_at, func.now()),
                )
            )
        else:
            await session.execute(
                marked.where(Message.memory_excluded.is_(None)).values(memory_processed_at=None)
            )
        of_exchanges = (Memory.conversation_id == conversation_id, Memory.source_message_ids.overlap(ids))
        claims = await memory_claims(session, *of_exchanges) if exclude else []
        forgotten = await forget_rows(session, *of_exchanges, tombstone=exclude)
        await remember_claims(store, session, claims, kind=FORGOTTEN_CLAIM)
        following = await _following(session, conversation_id, rows) if exclude else []
    await store.drop_points(forgotten)
    # The next memory of the thread was keyed with the line before it, now forgotten.
    await store.rewrite_points(following)
    return len(forgotten)


async def forget_memories(
    store: MemoryStore,
    *,
    user_id: str,
    personality_id: int | None = None,
    memory_ids: Sequence[uuid.UUID] | None = None,
) -> int:
    """Delete the user's memories (all, one personality's, or the given ids); returns how many.

    Forgotten by id, what they claimed is recorded so that it does not come back in other words;
    forgetting all of them (of a personality, or every one) forgets those records too, so that the
    user starts over (memory.formation.forgotten).
    """
    conditions = [Memory.user_id == user_id]
    if personality_id is not None:
        conditions.append(Memory.personality_id == personality_id)
    if memory_ids is not None:
        conditions.append(Memory.id.in_(list(memory_ids)))
    async with store.sessionmaker.begin() as session:
        claims = await memory_claims(session, *conditions) if memory_ids is not None else []
        forgotten = await forget_rows(session, *conditions)
        if memory_ids is None:
            await clear_claims(session, user_id=user_id, personality_id=personality_id)
            await cancel_pending(session, user_id=user_id, personality_id=personality_id)  # issue 33
        await remember_claims(store, session, claims, kind=FORGOTTEN_CLAIM)
    await store.drop_points(forgotten)
    return len(forgotten)


async def _following(session: AsyncSession, conversation_id: int, rows: Sequence[Message]) -> list[uuid.UUID]:
    """The live memory of each author of these messages that comes next after them in the log."""
    last = max(m.id for m in rows)
    first = aliased(Message)
    found = []
    for author in sorted({m.author_id for m in rows if m.role == MessageRole.USER.value}):
        memory_id = await session.scalar(
            select(Memory.id)
            .join(
                first,
                and_(
                    first.conversation_id == Memory.conversation_id,
                    first.external_id == Memory.source_message_ids[1],
                ),
            )
            .where(
                Memory.conversation_id == conversation_id,
                Memory.user_id == author,
                Memory.state != MemoryState.DELETED.value,
                first.id > last,
            )
            .order_by(first.id)
            .limit(1)
        )
        if memory_id is not None:
            found.append(memory_id)
    return found


async def steered_exchanges(
    store: MemoryStore, *, message_id: str, channel_id: str | None, user_id: str
) -> list[LoggedExchange]:
    """The user's own exchanges of this message; a clear error when it is unknown or someone else's."""
    async with store.sessionmaker() as session:
        exchanges = await logged_exchanges(session, message_id, channel_id)
    if not exchanges:
        raise NotFoundError(NOT_LOGGED)
    mine = [e for e in exchanges if e.owner_id == user_id]
    if not mine:
        raise PermissionDeniedError(NO_OWNER if all(e.owner_id is None for e in exchanges) else NOT_YOURS)
    return mine


async def remember(
    store: MemoryStore,
    form: FormConversation,
    *,
    message_id: str,
    channel_id: str | None,
    user_id: str,
) -> RememberReport:
    """Form the user's exchange of this message now, if it is not yet, and pin its memories."""
    report = RememberReport()
    for exchange in await steered_exchanges(
        store, message_id=message_id, channel_id=channel_id, user_id=user_id
    ):
        if INCOGNITO in exchange.excluded:
            raise InvalidInputError("That was said while you were incognito: it can never become a memory.")
        if not exchange.answered:
            raise InvalidInputError("That message has no reply yet: remember it once it is answered.")
        await _revive(store, exchange)
        ids = sorted(exchange.message_ids)
        for attempt in range(FORM_ATTEMPTS):
            formed = await form(exchange.conversation_id)
            report.remembered_message_ids.extend(formed.remembered_message_ids)
            if not await _still_pending(store, exchange.conversation_id, ids):
                break
            if attempt == FORM_ATTEMPTS - 1:
                raise InvalidInputError("That exchange is being remembered right now; try again in a moment.")
            await asyncio.sleep(FORM_RETRY_SECONDS)
        async with store.sessionmaker.begin() as session:
            pinned = await pin_rows(
                session,
                Memory.conversation_id == exchange.conversation_id,
                Memory.user_id == user_id,
                Memory.source_message_ids.overlap(ids),
            )
        if not pinned:
            raise InvalidInputError(
                "Nothing was remembered: memory is off for you with this personality (see `/memory status`)."
            )
        report.pinned += len(pinned)
    return report


async def forget_exchange(
    store: MemoryStore, *, message_id: str, channel_id: str | None, user_id: str
) -> int:
    """Forget the user's exchange of this message for good; returns how many memories went."""
    forgotten = 0
    for exchange in await steered_exchanges(
        store, message_id=message_id, channel_id=channel_id, user_id=user_id
    ):
        forgotten += await unform(
            store, conversation_id=exchange.conversation_id, external_ids=exchange.message_ids, exclude=True
        )
    return forgotten


async def _revive(store: MemoryStore, exchange: LoggedExchange) -> None:
    """An exchange with no live memory (forgotten, or skipped while memory was off) pending again:
    a "Forget this" taken back and its tombstones gone, for formation to form it now."""
    ids = sorted(exchange.message_ids)
    async with store.sessionmaker.begin() as session:
        await _claim(session, exchange.conversation_id)
        of_exchange = (
            Memory.conversation_id == exchange.conversation_id,
            Memory.source_message_ids.overlap(ids),
        )
        live = await session.scalar(
            select(func.count(Memory.id)).where(*of_exchange, Memory.state != MemoryState.DELETED.value)
        )
        if live:
            return
        # "Remember this" takes back what forgetting the exchange recorded of its claim, or formation
        # would drop the exchange as restating it.
        tombstones = select(Memory.id).where(*of_exchange)
        await session.execute(delete(ForgottenClaim).where(ForgottenClaim.memory_id.in_(tombstones)))
        await session.execute(delete(Memory).where(*of_exchange))
        await session.execute(
            update(Message)
            .where(
                Message.conversation_id == exchange.conversation_id,
                Message.external_id.in_(ids),
                or_(Message.memory_excluded.is_(None), Message.memory_excluded == FORGOTTEN),
            )
            .values(memory_excluded=None, memory_processed_at=None)
        )


async def _still_pending(store: MemoryStore, conversation_id: int, external_ids: Sequence[str]) -> bool:
    async with store.sessionmaker() as session:
        left = await session.scalar(
            select(func.count(Message.id)).where(
                Message.conversation_id == conversation_id,
                Message.external_id.in_(external_ids),
                Message.memory_processed_at.is_(None),
            )
        )
    return bool(left)
