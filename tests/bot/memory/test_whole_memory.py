"""Issue 34: a memory, whole. `personae memory show` and /memory show say how each kind of memory was
made (verbatim, summarized by which model, extractive and why), the key facts it keeps and those it
carries, where it came from, the original a hybrid memory keeps, pinned and edited; the same facts
through both doors; and a memory is named by a unique prefix of its id, as git names commits."""

from __future__ import annotations

import re
import uuid
from collections import Counter

import pytest

from bot.cli.app import build_parser
from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import FakeDiscord
from testkit.llm_server import LLMTestServer
from tests.bot.seeding import seed_memories

ALICE = 201
# Long enough to be summarized; the test model's summary is the first sentence, so the facts of the
# others are carried.
LONG = (
    (
        "My grandmother Rosa grew up in Napoli and moved to Lisbon in 1962 with three sisters. "
        "She opened a bakery on Rua Augusta that sold sfogliatelle every Sunday morning, and her "
        "neighbour Tiago still talks about the almond cake she made for his wedding in 1975.",
        "What a life Rosa had, from Napoli to a bakery in Lisbon.",
    ),
)


async def cli_show(runtime: Runtime, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """`personae memory show ...` through its parser and handler, on this runtime."""
    args = build_parser().parse_args(["memory", "show", *argv])
    capsys.readouterr()
    await args.handler(args, runtime)
    return capsys.readouterr().out


def discord_facts(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^\*\*([^*]+):\*\* (.+)$", text, re.MULTILINE)


async def only_memory(runtime: Runtime, user: int = ALICE) -> uuid.UUID:
    page = await runtime.memory.browse(user_id=str(user))
    assert page.total == 1
    memory_id: uuid.UUID = page.memories[0].id
    return memory_id


async def test_a_hybrid_summary_shown_whole_the_same_through_both_doors(
    fake_discord: FakeDiscord, runtime: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    sage, _ = await runtime.personalities.create("Sage", prompt="You are Sage.", memory_mode="hybrid")
    assert await seed_memories(runtime, sage, str(ALICE), exchanges=LONG) == 1
    prefix = str(await only_memory(runtime))[:8]

    shown = (await fake_discord.command("memory show", user=ALICE, memory=prefix)).reply
    assert shown.ephemeral
    facts = dict(discord_facts(shown.content))
    assert facts["stored as"].startswith("hybrid")
    assert facts["made"] == "summarized by openai/test-summarizer"
    assert "tiago" in facts["carries"] and "1975" in facts["carries"]  # dropped by the summary, carried
    assert "rosa" in facts["key facts"]  # facts are keyed casefolded
    assert f"m{ALICE}-0u" in facts["from"] and "Sage" in facts["from"]
    assert facts["pinned"] == "no" and facts["edited"] == "no"
    assert "**original (hybrid):**" in shown.content and "sfogliatelle" in shown.content

    out = await cli_show(runtime, capsys, prefix, "--user", str(ALICE))
    for label, value in discord_facts(shown.content):
        assert re.search(rf"^{re.escape(label)}: +{re.escape(value)}$", out, re.MULTILINE), (label, out)
    assert "original (hybrid):\n  " in out and "sfogliatelle every Sunday morning" in out


async def test_an_extractive_summary_says_why(
    fake_discord: FakeDiscord, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    llm_server.responder = lambda body: "I'm sorry, but I can't help with that."
    sage, _ = await runtime.personalities.create("Sage", prompt="You are Sage.", memory_mode="summarized")
    await seed_memories(runtime, sage, str(ALICE), exchanges=LONG)
    shown = await fake_discord.command("memory show", user=ALICE, memory=str(await only_memory(runtime)))
    facts = dict(discord_facts(shown.text))
    # Extractive, or the cleaned exchange when that was not smaller: either way, why.
    assert "model refused" in facts["made"], facts
    assert "original (hybrid)" not in shown.text


async def test_pinned_and_corrected_verbatim_memory_keeps_what_was_said(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality, capsys: pytest.CaptureFixture[str]
) -> None:
    await seed_memories(runtime, sage, str(ALICE), exchanges=(("My dog is Biscuit.", "Lovely."),))
    memory_id = await only_memory(runtime)
    out = await cli_show(runtime, capsys, str(memory_id)[:6], "--user", str(ALICE))
    assert "made:        verbatim: the exchange word for word" in out
    await runtime.memory.set_pinned(user_id=str(ALICE), memory_id=memory_id, pinned=True)
    await runtime.memory.correct(user_id=str(ALICE), memory_id=memory_id, content="My dog is Bramble.")

    shown = await fake_discord.command("memory show", user=ALICE, memory=str(memory_id)[:6])
    facts = dict(discord_facts(shown.text))
    assert facts["pinned"].startswith("yes") and facts["edited"].startswith("yes, corrected by the user")
    assert "took out Biscuit" in facts["edited"]  # the value the correction took out, as it was said
    assert facts["carries"] == "nothing: its text is the user's correction"
    assert "**as it was said:**" in shown.text and "My dog is Biscuit." in shown.text
    assert shown.text.rstrip().endswith("My dog is Bramble.")


async def test_short_ids_are_taken_where_unique_and_refused_in_one_line_where_not(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality, capsys: pytest.CaptureFixture[str]
) -> None:
    # Seventeen memories: two of them start with the same hex digit.
    things = (
        "a red kite",
        "my cousin Ana",
        "the Porto train",
        "a jazz record",
        "our old piano",
        "a blue bicycle",
        "the chess club",
        "my sourdough starter",
        "a lighthouse",
        "the tax office",
        "my grandfather's watch",
        "a tortoise named Speedy",
        "the night market",
        "a broken umbrella",
        "the salsa class",
        "a violin lesson",
        "the Lisbon flat",
    )
    said = tuple(
        (f"Today I thought about {thing} for hours.", f"Tell me more about {thing}.") for thing in things
    )
    await seed_memories(runtime, sage, str(ALICE), exchanges=said)
    ids = [str(m.id) for m in (await runtime.memory.browse(user_id=str(ALICE), limit=20)).memories]
    shared, _ = Counter(i[0] for i in ids).most_common(1)[0]
    pairs = (f"{a}{b}" for a in "0123456789abcdef" for b in "0123456789abcdef")
    unknown = next(p for p in pairs if not any(i.startswith(p) for i in ids))

    ambiguous = await fake_discord.command("memory show", user=ALICE, memory=shared)
    assert ambiguous.reply.ephemeral and f"The id prefix {shared} is ambiguous" in ambiguous.text
    missing = await fake_discord.command("memory forget", user=ALICE, memory=unknown)
    assert f"You have no memory whose id starts with {unknown}" in missing.text
    other = await fake_discord.command("memory show", user=ALICE + 1, memory=ids[0][:8])
    assert "You have no memory whose id starts with" in other.text  # only one's own memories

    args = build_parser().parse_args(["memory", "forget", shared, "--user", str(ALICE)])
    with pytest.raises(Exception, match=f"The id prefix {shared} is ambiguous"):
        await args.handler(args, runtime)
    unique = ids[0][: next(n for n in range(1, 37) if sum(i.startswith(ids[0][:n]) for i in ids) == 1)]
    args = build_parser().parse_args(["memory", "forget", unique, "--user", str(ALICE)])
    await args.handler(args, runtime)
    assert "Forgotten." in capsys.readouterr().out
    left = (await runtime.memory.browse(user_id=str(ALICE), limit=20)).memories
    assert ids[0] not in [str(m.id) for m in left] and len(left) == 16


async def test_browse_says_how_the_picked_memory_was_made(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality
) -> None:
    await seed_memories(runtime, sage, str(ALICE), exchanges=(("My dog is Biscuit.", "Lovely."),))
    memory_id = str(await only_memory(runtime))
    page = (await fake_discord.command("memory browse", user=ALICE)).reply
    assert "verbatim" not in page.content  # nothing picked yet
    await fake_discord.choose(page, [memory_id], user=ALICE)
    assert page.content.endswith(
        f"Memory **1**, verbatim: the exchange word for word. `/memory show memory:{memory_id[:8]}` "
        "shows it whole."
    )
