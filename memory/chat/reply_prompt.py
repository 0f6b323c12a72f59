"""The prompt for a stored message, read from its conversation: the recent history (up to the message
answered), the rolling summary, the personas of the user and of the others speaking here, the card's
parts for that history, and the recalled memories not already in view; fitted by memory.chat.prompt
within the budget ChatService gives it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.chat.card_parts import build_context_off_loop, card_parts_off_loop
from memory.chat.prompt import BuiltContext, ContextBudget, HistoryMessage
from memory.chat.prompt_persona import PromptPersona
from memory.chat.recalled import out_of_view, prompt_text
from memory.chat.refused import not_refused
from memory.chat.rolling import summary_text
from memory.owners.card_prompt import fill_user
from memory.owners.personas import personas_for
from memory.types import MessageRole
from models import Message, Persona

if TYPE_CHECKING:
    from memory.chat.turns import PreparedReply
    from memory.service import RecalledMemory

HISTORY_LIMIT = 80
# In a shared channel, the personas of this many other recent speakers are named (name and pronouns).
OTHER_SPEAKERS = 5


async def build_reply_prompt(
    sessionmaker: async_sessionmaker[AsyncSession],
    prepared: PreparedReply,
    recall: asyncio.Task[list[RecalledMemory]] | None,
    *,
    budget: ContextBudget,
    lore_scan_depth: int,
) -> BuiltContext:
    """The prompt for the stored message: system prompt, recalled memories (awaited from `recall`),
    summary, recent history; the memories it holds are kept in `prepared.memories`."""
    cfg = prepared.cfg
    request = prepared.request
    async with sessionmaker() as session:
        rows = list(
            (
                await session.scalars(
                    select(Message)
                    .where(Message.conversation_id == prepared.conversation_id, not_refused())
                    .order_by(Message.id.desc())
                    .limit(HISTORY_LIMIT)
                )
            ).all()
        )
        # Someone may have spoken after this message was stored: answer this one, with what came before.
        while rows and rows[0].external_id != request.message_id:
            rows.pop(0)
        summary = await summary_text(session, prepared.conversation_id)
        others = _other_speakers(rows, request.user_id) if request.guild_id is not None else {}
        personas = await personas_for(session, [request.user_id, *others], prepared.personality.id)
    history = [
        HistoryMessage(role=m.role, content=m.content, author_name=m.author_name, token_count=m.token_count)
        for m in reversed(rows)
    ] or [HistoryMessage(role="user", content=request.text, author_name=request.user_name)]
    memories = out_of_view(await recall if recall is not None else [], [m.external_id for m in rows])
    answered = personas.get(request.user_id)
    card = await card_parts_off_loop(  # issue 33: a big lorebook holds no other reply
        prepared.personality.card,
        display_name=prepared.personality.display_name,
        recent=[m.content for m in history],
        user=(user := answered.name if answered is not None else request.user_name),
        default_scan_depth=lore_scan_depth,
    )
    built = await build_context_off_loop(
        system_prompt=fill_user(prepared.personality.system_prompt, user),  # a card's {{user}}
        user_name=request.user_name,
        memories=[prompt_text(m) for m in memories],
        summary=summary,
        history=history,
        budget=budget,
        model=cfg.model if cfg else None,
        name_speakers=request.guild_id is not None,
        # Without a persona of theirs, the model still knows the name they write under.
        persona=_prompt_persona(personas.get(request.user_id), request.user_name)
        or PromptPersona(speaker=request.user_name, name=request.user_name),
        others=[p for i, name in others.items() if (p := _prompt_persona(personas.get(i), name)) is not None],
        card=card,
    )
    prepared.memories = memories[: built.memories_used]
    return built


def _other_speakers(rows: Sequence[Message], user_id: str) -> dict[str, str]:
    """The other users who spoke in `rows` (newest first), most recent first: id -> name they wrote as."""
    speakers: dict[str, str] = {}
    for row in rows:
        if row.role == MessageRole.USER.value and row.author_id != user_id and row.author_id not in speakers:
            speakers[row.author_id] = row.author_name or "someone"
            if len(speakers) == OTHER_SPEAKERS:
                break
    return speakers


def _prompt_persona(persona: Persona | None, speaker: str) -> PromptPersona | None:
    if persona is None:
        return None
    return PromptPersona(speaker=speaker, name=persona.name, pronouns=persona.pronouns, about=persona.about)
