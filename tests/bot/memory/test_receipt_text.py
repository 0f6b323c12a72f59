"""Issue 34: the text under a page of memories names the buttons that are there. The 🧠 receipt's
edit button is "Wrong…", and its text used to say "pin, edit or forget"."""

from __future__ import annotations

from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import CHANNEL, FakeDiscord, SentMessage
from testkit.llm_server import LLMTestServer
from tests.bot.memory.pages import shown_ids
from tests.bot.memory.test_receipt import ALICE, open_receipt, seed

ACTIONS = ("pin", "edit", "forget")  # the custom ids' last part of the actions on the picked memory


def hint_names_the_buttons(page: SentMessage) -> None:
    hint = page.content.splitlines()[-1]
    labels = [b["label"] for b in page.buttons if b["custom_id"].rsplit(":", 1)[-1] in ACTIONS]
    assert len(labels) == len(ACTIONS), page.buttons
    for label in labels:
        assert label.lower() in hint.lower(), (label, hint)


async def test_the_receipt_says_wrong_where_its_button_does(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime, llm_server: LLMTestServer
) -> None:
    await seed(runtime, lilith)
    llm_server.responder = lambda body: "Biscuit, of course."
    await fake_discord.say("Lilith, what is my dog called?", user=ALICE)
    [reply] = fake_discord.sent_by_bot(CHANNEL)
    page = (await open_receipt(fake_discord, reply)).reply
    assert shown_ids(page)
    hint_names_the_buttons(page)
    assert "Wrong…" in page.content.splitlines()[-1]


async def test_browse_says_edit_where_its_button_does(
    fake_discord: FakeDiscord, lilith: Personality, runtime: Runtime
) -> None:
    await seed(runtime, lilith)
    page = (await fake_discord.command("memory browse", user=ALICE)).reply
    hint_names_the_buttons(page)
