"""Corrections stick by meaning: what a user forgot or corrected does not come back in other words, in
formation nor in recall; only their own claims with that personality count; forgetting everything
starts over. Real PostgreSQL, Qdrant Edge, the local embedder (MemoryService as testkit.memory_service
builds it)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.service import MemoryService
from models import ForgottenClaim, Memory, Message, Personality
from testkit.memory_service import add_chat, add_personality, memories

CLAIM = "My sister Leila moved to Porto in March."
PARAPHRASE = "Leila, my sister, relocated to Porto back in March."
UNRELATED = "Leila is training for the Berlin marathon in October."
REPLY = "Thanks for telling me."


def exchange(text: str) -> list[tuple[str, str]]:
    return [("user", text), ("assistant", REPLY)]


async def say(
    sessionmaker: async_sessionmaker[AsyncSession],
    service: MemoryService,
    p: Personality,
    texts: Sequence[str],
    *,
    prefix: str,
    user_id: str = "u1",
    guild_id: str | None = None,
    channel_id: str | None = None,
) -> list[Memory]:
    """Say the texts (each answered), form them, and return the memories they made."""
    turns = [turn for text in texts for turn in exchange(text)]
    await add_chat(
        sessionmaker, p, turns, user_id=user_id, prefix=prefix, guild_id=guild_id, channel_id=channel_id
    )
    await service.form_pending()
    return [
        m for m in await memories(sessionmaker) if any(s.startswith(prefix) for s in m.source_message_ids)
    ]


def live(formed: list[Memory]) -> list[Memory]:
    """Those not superseded: a claim said again in messages from before it was recorded is."""
    return [m for m in formed if m.superseded_at is None]


async def recalled(service: MemoryService, p: Personality, query: str, user_id: str = "u1") -> list[str]:
    found = await service.recall(personality_id=p.id, user_id=user_id, query=query, limit=10)
    return [m.content for m in found]


async def excluded(sessionmaker: async_sessionmaker[AsyncSession], prefix: str) -> set[str | None]:
    async with sessionmaker() as session:
        rows = await session.scalars(
            select(Message.memory_excluded).where(Message.external_id.startswith(prefix))
        )
        return set(rows.all())


async def test_a_forgotten_claim_said_again_in_other_words_is_superseded(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    [claim] = await say(sessionmaker, service, p, [CLAIM], prefix="a")
    assert await service.forget(user_id="u1", memory_ids=[claim.id]) == 1
    async with sessionmaker() as session:
        [record] = (await session.scalars(select(ForgottenClaim))).all()
    # Its meaning and key facts, for this user and personality; never its words.
    assert (record.user_id, record.personality_id, record.memory_id, record.kind) == (
        "u1",
        p.id,
        claim.id,
        "forgotten",
    )
    assert len(record.embedding) == 384 and set(record.facts["names"]) == {"leila", "porto"}
    assert "march" in record.facts["dates"] and "Porto" not in str(record.facts)

    # Said again, in messages from before the claim was recorded: formed superseded, never recalled.
    assert live(await say(sessionmaker, service, p, [PARAPHRASE], prefix="b")) == []
    assert await excluded(sessionmaker, "b") == {None}
    # Something else about the same people is remembered, and recalled.
    [unrelated] = await say(sessionmaker, service, p, [UNRELATED], prefix="c")
    assert unrelated.state == "indexed"
    assert (await recalled(service, p, "What race is Leila training for?"))[0] == unrelated.content
    for query in ("Where did my sister Leila move?", "Leila Porto March", PARAPHRASE):
        assert all("Porto" not in text for text in await recalled(service, p, query))


async def test_a_correction_is_not_undone_by_a_contradiction_nor_by_another_user_or_personality(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    sage = await add_personality(sessionmaker, "Sage")
    lilith = await add_personality(sessionmaker, "Lilith")
    [claim] = await say(sessionmaker, service, sage, ["I'm allergic to peanuts."], prefix="a")
    await service.forget(user_id="u1", memory_ids=[claim.id])
    # Saying the opposite is a correction, remembered; so is the same claim by another user, or to
    # another personality: a claim is forgotten for its user and personality only.
    assert (
        len(await say(sessionmaker, service, sage, ["I'm not allergic to peanuts at all."], prefix="b")) == 1
    )
    assert (
        len(await say(sessionmaker, service, sage, ["Peanuts make me ill."], prefix="c", user_id="u2")) == 1
    )
    assert len(await say(sessionmaker, service, lilith, ["Peanuts make me ill."], prefix="d")) == 1
    said_again = await say(
        sessionmaker, service, sage, ["Peanuts make me ill, I have an allergy."], prefix="e"
    )
    assert len(said_again) == 1 and live(said_again) == []


async def test_memories_already_saying_a_forgotten_claim_are_silenced_and_a_pin_lets_one_back(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    [claim] = await say(sessionmaker, service, p, [CLAIM], prefix="a")
    # Said before, elsewhere (another conversation: both stay memories).
    [again] = await say(sessionmaker, service, p, [PARAPHRASE], prefix="b", guild_id="g1", channel_id="c1")
    [other] = await say(sessionmaker, service, p, [UNRELATED], prefix="c")
    assert again.id in {
        m.id for m in await service.recall(personality_id=p.id, user_id="u1", query="Leila Porto")
    }

    await service.forget(user_id="u1", memory_ids=[claim.id])
    silenced = {m.id: m.forgotten_claim_id for m in await memories(sessionmaker)}
    assert silenced[again.id] is not None and silenced[other.id] is None
    for query in ("Leila Porto", "Where did my sister move?", PARAPHRASE):
        found = await service.recall(personality_id=p.id, user_id="u1", query=query, limit=10)
        assert again.id not in {m.id for m in found} | {c.id for m in found for c in m.context}
    # Still the user's, listed; pinning it says they want it back.
    assert again.id in {m.id for m in (await service.browse(user_id="u1", limit=10)).memories}
    await service.set_pinned(user_id="u1", memory_id=again.id, pinned=True)
    assert again.id in {
        m.id for m in await service.recall(personality_id=p.id, user_id="u1", query="Leila Porto")
    }


async def test_a_corrected_memory_keeps_its_correction_and_its_old_claim_stays_away(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    [memory] = await say(sessionmaker, service, p, ["I love mushrooms on pizza."], prefix="a")
    await service.correct(user_id="u1", memory_id=memory.id, content="Alice hates mushrooms.")
    async with sessionmaker() as session:
        [record] = (await session.scalars(select(ForgottenClaim))).all()
    assert (record.kind, record.memory_id) == ("corrected", memory.id) and record.corrected_to is not None
    # The corrected memory itself is never silenced by its own old claim.
    [corrected] = await memories(sessionmaker)
    assert corrected.forgotten_claim_id is None and corrected.content == "Alice hates mushrooms."
    # The old claim said again is not remembered; the correction said again is.
    assert (
        live(await say(sessionmaker, service, p, ["Mushrooms on pizza are my favourite."], prefix="b")) == []
    )
    kept = await say(sessionmaker, service, p, ["I really hate mushrooms."], prefix="c")
    async with sessionmaker() as session:
        sources = await session.scalar(select(Memory.source_message_ids).where(Memory.id == memory.id))
    assert kept or "c0" in (sources or [])  # a memory of its own, or the correction reinforced


async def test_forget_this_records_the_claim_and_forgetting_everything_starts_over(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    p = await add_personality(sessionmaker, "Sage")
    await say(sessionmaker, service, p, [CLAIM], prefix="a")
    assert await service.forget_message(message_id="a0", channel_id=None, user_id="u1") == 1
    assert live(await say(sessionmaker, service, p, [PARAPHRASE], prefix="b")) == []

    # A regenerated reply re-forms its exchange: nothing is forgotten, no claim recorded.
    [other] = await say(sessionmaker, service, p, [UNRELATED], prefix="c")
    conversation = other.conversation_id
    assert conversation is not None
    await service.unform(conversation_id=conversation, external_ids=["c0", "c1"], exclude=False)
    async with sessionmaker() as session:
        assert await session.scalar(select(func.count(ForgottenClaim.id))) == 1

    # /memory forget all: the memories go, and so do the claims.
    await service.forget(user_id="u1", personality_id=p.id)
    async with sessionmaker() as session:
        assert await session.scalar(select(func.count(ForgottenClaim.id))) == 0
    assert len(await say(sessionmaker, service, p, [PARAPHRASE.replace("back in", "in")], prefix="d")) == 1


async def test_the_personalitys_name_makes_no_two_claims_alike(
    sessionmaker: async_sessionmaker[AsyncSession], service: MemoryService
) -> None:
    """Users call the personality by its name: "Lilith, my favourite colour is teal" and "Lilith, what is
    your favourite book?" were 0.65 alike for it (0.27 without), and the forget superseded the other."""
    p = await add_personality(sessionmaker, "Lilith")
    [claim] = await say(sessionmaker, service, p, ["Lilith, my favourite colour is teal"], prefix="a")
    assert await service.forget(user_id="u1", memory_ids=[claim.id]) == 1
    later = await say(
        sessionmaker,
        service,
        p,
        ["Lilith, what is your favourite book?", "Lilith, my bike is a red Gazelle"],
        prefix="b",
    )
    assert len(live(later)) == 2, [m.content for m in later]
    # Said again, addressed or not, it is still the claim.
    [again] = await say(sessionmaker, service, p, ["Lilith, teal is my favourite colour"], prefix="c")
    assert again.superseded_at is not None
