"""/memory browse through the real command tree: pages of five, Previous/Next, and Pin/Unpin, Edit (a
modal) and Forget on the memory picked, with the real memory service behind them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select

from bot.runtime import Runtime
from memory.recall.keywords import encode_sparse_query
from memory.types import RecallFilter
from models import Memory, Personality
from testkit.fake_discord import FakeDiscord, SentMessage
from tests.bot.memory.pages import shown_ids
from tests.bot.seeding import EXCHANGES, seed_memories

ALICE = 201
BOB = 202
OWNER = 101
GUILD = 300
HOBBIES = tuple(
    (f"Week {i}: I practised {hobby} on Saturday.", f"{hobby.capitalize()} again, nice.")
    for i, hobby in enumerate(
        ("archery", "pottery", "fencing", "juggling", "origami", "rowing", "chess", "karate", "salsa")
    )
)


@pytest.fixture
async def sage(runtime: Runtime) -> Personality:
    personality, _ = await runtime.personalities.create("Sage", owner_id=str(OWNER))
    return personality


async def alice_memories(runtime: Runtime) -> dict[str, Memory]:
    """Alice's live memories by id."""
    async with runtime.sessionmaker() as session:
        rows = await session.scalars(
            select(Memory).where(Memory.user_id == str(ALICE), Memory.state != "deleted")
        )
        return {str(m.id): m for m in rows.all()}


async def keyword_hits(runtime: Runtime, sage: Personality, words: str) -> list[uuid.UUID]:
    found = await runtime.memory._store.index.search(
        dense=None,
        sparse=encode_sparse_query(words),
        flt=RecallFilter(personality_id=sage.id, user_id=str(ALICE)),
        limit=10,
    )
    return [hit.id for hit in found.keyword]


def button(message: SentMessage, label: str) -> dict[str, Any]:
    return next(b for b in message.buttons if b["label"] == label)


async def test_browse_pages_through_twelve_memories_five_at_a_time(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    assert await seed_memories(runtime, sage, str(ALICE), exchanges=EXCHANGES + HOBBIES) == 12
    await seed_memories(runtime, sage, str(BOB), exchanges=(("My dog is called Rex.", "Rex, nice."),))
    newest_first = [
        str(m.id) for m in sorted((await alice_memories(runtime)).values(), key=lambda m: m.occurred_at)
    ]
    newest_first.reverse()

    opened = await fake_discord.command("memory browse", user=ALICE, guild=GUILD)
    page = opened.reply
    assert page.ephemeral
    assert "page 1 of 3 (12 in all)" in page.content and "newest first" in page.content
    assert shown_ids(page) == newest_first[:5]
    assert "Week 8: I practised salsa" in page.content and "Rex" not in page.content
    assert button(page, "Previous").get("disabled") and not button(page, "Next").get("disabled")
    # Nothing picked yet: the actions wait for a pick.
    assert all(button(page, label).get("disabled") for label in ("Pin", "Edit", "Forget"))

    await fake_discord.click(page, "Next", user=ALICE)
    assert "page 2 of 3" in page.content and shown_ids(page) == newest_first[5:10]
    assert "**6.**" in page.content
    await fake_discord.click(page, "Next", user=ALICE)
    assert "page 3 of 3" in page.content and shown_ids(page) == newest_first[10:]
    assert button(page, "Next").get("disabled")
    await fake_discord.click(page, "Previous", user=ALICE)
    assert shown_ids(page) == newest_first[5:10]

    # Someone else's press is refused, and changes nothing.
    refused = await fake_discord.click(page, "Next", user=BOB)
    assert refused.reply.ephemeral and "aren't yours" in refused.text
    assert shown_ids(page) == newest_first[5:10]

    # One personality's memories only, in a DM too.
    await runtime.personalities.create("Lilith", owner_id=str(OWNER))
    empty = await fake_discord.command("memory browse", user=ALICE, personality="lilith")
    assert empty.reply.ephemeral and empty.text == "You have no memories with **Lilith**."
    dm = await fake_discord.command("memory browse", user=ALICE, personality="sage")
    assert dm.reply.ephemeral and "page 1 of 3" in dm.text and "with **Sage**" in dm.text


async def test_pin_edit_and_forget_from_browse(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE))
    page = (await fake_discord.command("memory browse", user=ALICE)).reply
    dog_id = next(i for i, m in (await alice_memories(runtime)).items() if "Biscuit" in m.content)
    position = shown_ids(page).index(dog_id) + 1

    await fake_discord.choose(page, [dog_id], user=ALICE)
    assert not button(page, "Pin").get("disabled")
    await fake_discord.click(page, "Pin", user=ALICE)
    assert (await alice_memories(runtime))[dog_id].pinned
    assert f"**{position}.** Sage · 2024-03-10 📌 pinned · `{dog_id[:8]}" in page.content
    assert "Pinned: recalled ahead" in page.content
    await fake_discord.click(page, "Unpin", user=ALICE)
    assert not (await alice_memories(runtime))[dog_id].pinned
    assert "📌" not in page.content and button(page, "Pin")

    # Edit: a modal prefilled with the memory; the correction replaces it and is what recall finds.
    said = (await alice_memories(runtime))[dog_id].content
    opened = await fake_discord.click(page, "Edit", user=ALICE)
    modal = opened.modal
    field = modal["components"][0]["components"][0]
    assert field["value"] == said
    await fake_discord.submit_modal(
        modal, {field["custom_id"]: "Alice's dog is Waffles, a greyhound."}, user=ALICE, message=page
    )
    corrected = (await alice_memories(runtime))[dog_id]
    assert corrected.content == "Alice's dog is Waffles, a greyhound."
    assert corrected.content_verbatim == said and corrected.edited_at is not None
    assert "✏️ edited" in page.content and "Waffles" in page.content and "Corrected" in page.content
    found = await runtime.memory.recall(personality_id=sage.id, user_id=str(ALICE), query="Waffles greyhound")
    assert found[0].id == corrected.id
    # The old words key it no more (the keyword side; the dense side only ranks by meaning).
    assert corrected.id not in await keyword_hits(runtime, sage, "Biscuit beach")
    assert await keyword_hits(runtime, sage, "Waffles") == [corrected.id]
    # An empty correction is refused, privately; the memory stays.
    reopened = await fake_discord.click(page, "Edit", user=ALICE)
    refused = await fake_discord.submit_modal(
        reopened.modal, {field["custom_id"]: "   "}, user=ALICE, message=page
    )
    assert refused.reply.ephemeral and "can't be empty" in refused.text
    assert (await alice_memories(runtime))[dog_id].content == corrected.content

    # Forget asks first; Keep it changes nothing, Forget it deletes.
    await fake_discord.click(page, "Forget", user=ALICE)
    assert "This cannot be undone" in page.content
    await fake_discord.click(page, "Keep it", user=ALICE)
    assert dog_id in await alice_memories(runtime)
    await fake_discord.click(page, "Forget", user=ALICE)
    await fake_discord.click(page, "Forget it", user=ALICE)
    assert dog_id not in await alice_memories(runtime)
    assert "Forgotten" in page.content and dog_id not in shown_ids(page) and "(2 in all)" in page.content
    assert dog_id not in {str(i) for i in await runtime.memory._store.index.ids(sage.id)}


async def test_browse_by_query_puts_the_best_match_first(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE), exchanges=EXCHANGES + HOBBIES)
    await seed_memories(runtime, sage, str(BOB), exchanges=(("My dog is called Rex.", "Rex, nice."),))
    found = await fake_discord.command("memory browse", user=ALICE, query="what is my dog called")
    page = found.reply
    assert page.ephemeral and "matching “what is my dog called”" in page.content
    first = (await alice_memories(runtime))[shown_ids(page)[0]]
    assert "Biscuit" in first.content and "Rex" not in page.content
    # Pinned from the search's page: the page shows it as stored.
    await fake_discord.choose(page, [str(first.id)], user=ALICE)
    await fake_discord.click(page, "Pin", user=ALICE)
    assert "📌 pinned" in page.content and (await alice_memories(runtime))[str(first.id)].pinned
    nothing = await fake_discord.command("memory browse", user=BOB, query="Lisbon job", personality="sage")
    assert "Lisbon in March" not in nothing.text


async def test_long_memories_share_discords_limit(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    # Each day's walk saw other birds: six memories, not one said six times.
    birds = ("herons", "swans", "kingfishers", "cormorants", "egrets", "grebes")
    long = tuple((f"I walked along the river and counted {bird}. " * 30, "Lovely.") for bird in birds)
    await seed_memories(runtime, sage, str(ALICE), exchanges=long)
    page = (await fake_discord.command("memory browse", user=ALICE)).reply
    assert len(page.content) <= 2000
    assert len(shown_ids(page)) == 5 and page.content.endswith(
        "Pick a memory below to pin, edit or forget it."
    )
    await fake_discord.choose(page, [shown_ids(page)[0]], user=ALICE)
    await fake_discord.click(page, "Forget", user=ALICE)
    assert len(page.content) <= 2000 and page.content.endswith("This cannot be undone.")
