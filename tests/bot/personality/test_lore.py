"""/personality lore on the fake Discord: a personality's managers list, add, edit, enable and disable
its lore entries, and the entries reach the prompts the test LLM server receives."""

from __future__ import annotations

from bot.runtime import Runtime
from testkit.fake_discord import CHANNEL, FakeDiscord
from testkit.llm_server import LLMTestServer
from tests.bot.state import bind

OWNER = 101
OTHER = 102


async def create_lilith(fake_discord: FakeDiscord) -> None:
    await fake_discord.command(
        "personality create", user=OWNER, name="lilith", display_name="Lilith", prompt="You are Lilith."
    )


def system_prompt(llm_server: LLMTestServer) -> str:
    return str(llm_server.requests[-1]["messages"][0]["content"])


async def test_a_manager_adds_edits_and_disables_lore_that_reaches_the_prompt(
    fake_discord: FakeDiscord, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    await create_lilith(fake_discord)
    empty = await fake_discord.command("personality lore list", user=OWNER, personality="lilith")
    assert empty.reply.ephemeral and "no lore yet" in empty.text
    added = await fake_discord.command(
        "personality lore add",
        user=OWNER,
        personality="lilith",
        keys="Porto, the river",
        text="Lilith grew up by the Douro in Porto.",
        comment="Home",
    )
    assert added.reply.ephemeral
    assert added.text == "Added lore entry **1** (Porto, the river, before)."
    await fake_discord.command(
        "personality lore add", user=OWNER, personality="lilith", text="Lilith never lies.", constant=True
    )
    listed = await fake_discord.command("personality lore list", user=OWNER, personality="lilith")
    assert listed.text.splitlines() == [
        "**Lore of `lilith`** · page 1 of 1 (2 entries)",
        "**1** · Porto, the river · before",
        "> Home: Lilith grew up by the Douro in Porto.",
        "**2** · always · before",
        "> Lilith never lies.",
    ]

    lilith = await runtime.personalities.get("lilith")
    await bind(runtime, lilith)
    llm_server.responder = lambda body: "I remember."
    await fake_discord.say("Tell me about Porto.", channel=CHANNEL)
    assert "Douro" in system_prompt(llm_server) and "never lies" in system_prompt(llm_server)
    await fake_discord.say("Nice weather.", channel=CHANNEL)
    assert "Douro" not in system_prompt(llm_server) and "never lies" in system_prompt(llm_server)

    changed = await fake_discord.command(
        "personality lore edit", user=OWNER, personality="lilith", number=1, keys="Lisbon", position="after"
    )
    assert changed.text == "Changed lore entry **1** (Lisbon, after)."
    off = await fake_discord.command("personality lore disable", user=OWNER, personality="lilith", number=2)
    assert off.text == "Lore entry **2** (Lilith never lies.) is disabled: it never reaches the prompt."
    await fake_discord.say("Lisbon then?", channel=CHANNEL)
    assert "Douro" in system_prompt(llm_server) and "never lies" not in system_prompt(llm_server)
    listed = await fake_discord.command("personality lore list", user=OWNER, personality="lilith")
    assert "**2** · **off** · always · before" in listed.text
    on = await fake_discord.command("personality lore enable", user=OWNER, personality="lilith", number=2)
    assert on.text == "Lore entry **2** (Lilith never lies.) is enabled."


async def test_lore_is_for_managers_and_mistakes_get_one_line(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await create_lilith(fake_discord)
    for path, options, doing in (
        ("personality lore list", {}, "read its lore"),  # reading is refused as reading, not changing
        ("personality lore add", {"text": "Hers now."}, "change it"),
        ("personality lore disable", {"number": 1}, "change it"),
    ):
        refused = await fake_discord.command(path, user=OTHER, personality="lilith", **options)
        assert refused.reply.ephemeral
        assert refused.text == f"Only the owner of Lilith (or a bot admin) can {doing}."
    missing = await fake_discord.command(
        "personality lore enable", user=OWNER, personality="lilith", number=3
    )
    assert missing.text == "There is no lore entry 3; the lore list shows the entries' numbers."
    nothing = await fake_discord.command("personality lore edit", user=OWNER, personality="lilith", number=1)
    assert "\n" not in nothing.text and "Nothing to change" in nothing.text
    bad = await fake_discord.command(
        "personality lore add", user=OWNER, personality="lilith", keys="/(unclosed/", text="Broken."
    )
    assert "not a valid regular expression" in bad.text and "\n" not in bad.text
    keyless = await fake_discord.command(
        "personality lore add", user=OWNER, personality="lilith", text="Lost."
    )
    assert keyless.text == "A lore entry needs keys that activate it, unless it is constant."
    assert (await runtime.lore.book("lilith", actor=None)).entries == ()  # nothing half-written


async def test_a_long_lorebook_is_listed_in_pages_and_entries_are_completed_by_name(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await create_lilith(fake_discord)
    for n in range(1, 13):
        await fake_discord.command(
            "personality lore add", user=OWNER, personality="lilith", keys=f"k{n}", text=f"Fact {n}."
        )
    first = await fake_discord.command("personality lore list", user=OWNER, personality="lilith")
    assert first.text.startswith("**Lore of `lilith`** · page 1 of 2 (12 entries)")
    assert "> Fact 10." in first.text and "Fact 11." not in first.text
    assert first.text.endswith("Next: `/personality lore list page:2`.")
    second = await fake_discord.command("personality lore list", user=OWNER, personality="lilith", page=5)
    assert second.text.startswith("**Lore of `lilith`** · page 2 of 2")
    assert "> Fact 11." in second.text and "> Fact 12." in second.text and "Fact 10." not in second.text
    assert len(first.text) <= 2000

    offered = await fake_discord.autocomplete(
        "personality lore edit", "number", user=OWNER, personality="lilith", number="k1"
    )
    assert [c["value"] for c in offered.choices] == [1, 10, 11, 12]
    hidden = await fake_discord.autocomplete(
        "personality lore edit", "number", user=OTHER, personality="lilith", number=""
    )
    assert hidden.choices == []
