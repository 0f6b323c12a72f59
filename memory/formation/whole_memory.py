"""One memory, whole: what it says and how it was made, for `memory show` and /memory show.

How: stored verbatim, cleaned (too short to summarize, or a summary that was not smaller), summarized
by which model, or extractive and why (the fallback's reason); in hybrid mode, the original exchange
kept beside the summary. What it keeps: the key facts of its text, and those its summary dropped that
it carries (its text's last lines). Where from: the messages it was formed from, with who said them
and when, in which conversation. And what happened to it since: pinned, corrected (what was said is
kept), said again, superseded.

A memory is named by its id or by a unique prefix of it (as git names commits): `resolve_memory_id`.
Only the user's own live memories are ever read.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, String, cast, func, select

from memory.errors import InvalidInputError, NotFoundError
from memory.formation.fidelity import extract_key_facts
from memory.formation.forgotten import CORRECTED_CLAIM
from memory.formation.resummarize import source_messages
from memory.formation.stats import FALLBACK_LABELS
from memory.formation.summarizer import FallbackReason
from memory.formation.supersession import WrongValues
from memory.recall.curation import BrowsedMemory, memories_by_id
from memory.recall.store import MemoryStore
from memory.types import MemoryState, MessageRole
from models import Conversation, ForgottenClaim, Memory

# The fewest characters of an id a listing shows (git's default abbreviation is 7; a memory's id has
# its first hyphen at 9, so 8 is its first part whole).
SHORT_ID_LENGTH = 8
# Ids of several memories an ambiguous prefix names, at most, in its error.
AMBIGUOUS_SHOWN = 5
ID_CHARS = re.compile(r"[0-9a-f-]{1,36}")
WHOLE_ID = str(uuid.UUID(int=0))
# The summarizer column's values that are no model.
VERBATIM, CLEANED, EXTRACTIVE = "verbatim", "cleaned", "extractive"
REPLY = MessageRole.ASSISTANT.value


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """A message the memory was formed from."""

    external_id: str
    author: str  # the name it was said under (the personality's, for a reply)
    is_reply: bool
    said_at: datetime


@dataclass(frozen=True, slots=True)
class WholeMemory:
    """A memory with how it was made and where it came from (see the module docstring)."""

    memory: BrowsedMemory
    mode: str  # verbatim | summarized | hybrid
    summarizer: str  # the model's name, or verbatim, cleaned, extractive
    fallback: str | None  # why the summary is extractive or the cleaned text (FallbackReason)
    kept_facts: list[str]  # the key facts its text holds
    carried_facts: list[str]  # those its summary dropped, carried in its text's last lines
    original: str | None  # the exchange as said: hybrid's, or kept when pinned or corrected
    sources: list[SourceMessage]
    conversation_id: int | None
    conversation_title: str | None
    guild_id: str | None
    channel_id: str | None
    formed_at: datetime
    edited_at: datetime | None
    corrected_out: list[str]  # the values the user's correction took out, as they were said
    times_said: int
    last_said_at: datetime | None
    repeat_of: uuid.UUID | None  # the memory of another conversation that it says again
    indexed: bool  # searchable; else waiting to be indexed, or set aside (see the log)

    @property
    def how_made(self) -> str:
        """How its text was made, in a few words."""
        if self.summarizer == VERBATIM:
            return "verbatim: the exchange word for word"
        if self.summarizer == CLEANED:
            if self.fallback is None:
                return "cleaned: roleplay formatting removed (too short to gain from a summary)"
            if self.fallback == FallbackReason.NOT_SMALLER:
                return "cleaned: the model's summary was not smaller than the cleaned exchange"
            return f"cleaned: {self.fallback_reason}, and the extractive summary was not smaller"
        if self.summarizer == EXTRACTIVE:
            return f"extractive summary: {self.fallback_reason or 'the summarizer failed'}"
        return f"summarized by {self.summarizer}"

    @property
    def fallback_reason(self) -> str | None:
        """Why the model's summary is not the memory's text, in a few words (None: it is, or none asked)."""
        if self.fallback is None:
            return None
        known = {reason.value for reason in FallbackReason}
        return FALLBACK_LABELS[FallbackReason(self.fallback)] if self.fallback in known else self.fallback


def _live(user_id: str) -> tuple[ColumnElement[bool], ...]:
    return (Memory.user_id == user_id, Memory.state != MemoryState.DELETED.value)


async def resolve_memory_id(store: MemoryStore, *, user_id: str, text: str) -> uuid.UUID:
    """The id of the user's live memory named by `text`: its id, or a prefix of it that no other of
    their memories starts with. InvalidInputError when it is no id or an ambiguous prefix (naming a
    few that share it), NotFoundError when none of their memories starts with it."""
    prefix = text.strip().lower()
    if not ID_CHARS.fullmatch(prefix):
        raise InvalidInputError(f"{text.strip()!r} is not a memory id (or the start of one)")
    named: ColumnElement[bool]
    if len(prefix) == len(WHOLE_ID):  # a whole id: by the primary key
        try:
            named = Memory.id == uuid.UUID(prefix)
        except ValueError:
            raise InvalidInputError(f"{text.strip()!r} is not a memory id") from None
        missing = f"You have no memory with id {prefix}."
    else:
        named = cast(Memory.id, String).startswith(prefix, autoescape=True)
        missing = f"You have no memory whose id starts with {prefix}."
    async with store.sessionmaker() as session:
        found = list(
            (
                await session.scalars(
                    select(Memory.id)
                    .where(*_live(user_id), named)
                    .order_by(Memory.id)
                    .limit(AMBIGUOUS_SHOWN + 1)
                )
            ).all()
        )
    if not found:
        raise NotFoundError(missing)
    if len(found) > 1:
        shown = ", ".join(str(i)[: max(len(prefix) + 4, 8)] for i in found[:AMBIGUOUS_SHOWN])
        more = " and more" if len(found) > AMBIGUOUS_SHOWN else ""
        raise InvalidInputError(f"The id prefix {prefix} is ambiguous: {shown}{more} start with it.")
    return found[0]


async def short_ids(store: MemoryStore, *, user_id: str, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Each id's shortest prefix, of at least SHORT_ID_LENGTH characters, that no other of the user's live
    memories starts with (what `resolve_memory_id` takes back), as git abbreviates commits. An id is
    told from all others by telling it from its neighbours in id order, which the database finds."""
    if not ids:
        return {}
    ordered = (
        select(
            Memory.id,
            func.lag(Memory.id).over(order_by=Memory.id).label("before"),
            func.lead(Memory.id).over(order_by=Memory.id).label("after"),
        )
        .where(*_live(user_id))
        .subquery()
    )
    async with store.sessionmaker() as session:
        rows = (await session.execute(select(ordered).where(ordered.c.id.in_(ids)))).all()
    return {row.id: _shortest_prefix(row.id, [row.before, row.after]) for row in rows}


def _shortest_prefix(memory_id: uuid.UUID, neighbours: list[uuid.UUID | None]) -> str:
    whole = str(memory_id)
    shared = [_common_length(whole, str(n)) for n in neighbours if n is not None]
    length = max([SHORT_ID_LENGTH, *(n + 1 for n in shared)])
    if whole[length - 1 : length] == "-":  # a prefix does not end on a hyphen: one character more
        length += 1
    return whole[:length]


def _common_length(one: str, other: str) -> int:
    return next((at for at, (a, b) in enumerate(zip(one, other, strict=True)) if a != b), len(one))


async def whole_memory(store: MemoryStore, *, user_id: str, memory_id: uuid.UUID) -> WholeMemory:
    """The user's memory with how it was made and where it came from (NotFoundError: none such)."""
    found = await memories_by_id(store, user_id=user_id, ids=[memory_id])
    if not found:
        raise NotFoundError("You have no memory with that id.")
    browsed = found[0]
    async with store.sessionmaker() as session:
        memory = await session.get_one(Memory, memory_id)
        conversation = (
            await session.get(Conversation, memory.conversation_id) if memory.conversation_id else None
        )
        wrong = await session.scalar(
            select(ForgottenClaim.facts["wrong"])
            .where(ForgottenClaim.memory_id == memory.id, ForgottenClaim.kind == CORRECTED_CLAIM)
            .order_by(ForgottenClaim.id.desc())
            .limit(1)
        )
        messages = await source_messages(session, memory)
    return WholeMemory(
        memory=browsed,
        mode=memory.mode,
        summarizer=memory.summarizer,
        fallback=memory.summary_fallback,
        kept_facts=sorted(extract_key_facts(memory.content)),
        carried_facts=list(memory.fidelity_misses),
        original=memory.content_verbatim,
        sources=[
            SourceMessage(
                m.external_id,
                browsed.personality_name if m.role == REPLY else (m.author_name or m.author_id),
                m.role == REPLY,
                m.created_at,
            )
            for m in messages
        ],
        conversation_id=memory.conversation_id,
        conversation_title=conversation.title if conversation else None,
        guild_id=memory.guild_id,
        channel_id=memory.channel_id,
        formed_at=memory.created_at,
        edited_at=memory.edited_at,
        corrected_out=_taken_out(WrongValues.from_json(wrong), memory.content_verbatim or ""),
        times_said=memory.times_said,
        last_said_at=memory.last_said_at,
        repeat_of=memory.repeat_of,
        indexed=memory.state == MemoryState.INDEXED.value,
    )


def _taken_out(wrong: WrongValues | None, said: str) -> list[str]:
    """The values a correction took out, as written in what was said (stems are all it records)."""
    if wrong is None:
        return []
    words = dict.fromkeys(wrong.words_in(said).split())
    return [*words, *(n for n in sorted(wrong.numbers) if n not in words)]
