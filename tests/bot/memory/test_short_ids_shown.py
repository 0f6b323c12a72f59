"""Discord names memories as the CLI does: /memory search and /memory browse show each memory's short
id (its shortest unique prefix, `personae memory list`'s ID column), and /memory show and forget take
it back."""

from __future__ import annotations

import re

import pytest

from bot.cli.app import build_parser
from bot.runtime import Runtime
from models import Personality
from testkit.fake_discord import FakeDiscord
from tests.bot.memory.pages import SHOWN_ID
from tests.bot.seeding import seed_memories

ALICE = 201
SAID = tuple(
    (f"On day {day} I walked my dog Biscuit to the {place}.", f"The {place}, Biscuit must have loved it.")
    for day, place in enumerate(("beach", "harbour", "old fort", "market", "river", "lighthouse", "park"))
)


async def cli_listed_ids(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The ID column of `personae memory list --user ALICE`, newest first."""
    args = build_parser().parse_args(["memory", "list", "--user", str(ALICE)])
    capsys.readouterr()
    await args.handler(args, runtime)
    out = capsys.readouterr().out.splitlines()
    header = next(n for n, line in enumerate(out) if line.startswith("ID "))
    return [line.split()[0] for line in out[header + 1 :] if re.match(SHOWN_ID, line)]


async def test_search_and_browse_show_the_clis_short_ids_and_show_and_forget_take_them(
    fake_discord: FakeDiscord, runtime: Runtime, sage: Personality, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await seed_memories(runtime, sage, str(ALICE), exchanges=SAID) == len(SAID)
    listed = await cli_listed_ids(runtime, capsys)
    assert len(listed) == len(SAID) and all(len(i) < 36 for i in listed)

    found = await fake_discord.command("memory search", user=ALICE, query="Biscuit at the lighthouse")
    searched = re.findall(rf"^`({SHOWN_ID})` ", found.text, re.MULTILINE)
    assert searched and set(searched) <= set(listed), (searched, listed)

    page = (await fake_discord.command("memory browse", user=ALICE)).reply
    assert re.findall(rf"· `({SHOWN_ID})`", page.content) == listed[:5]  # newest first, both doors

    shown = await fake_discord.command("memory show", user=ALICE, memory=searched[0])
    best = found.text.splitlines()[1].split(": ", 1)[1].rstrip("…")
    assert best[:30] in shown.text
    gone = await fake_discord.command("memory forget", user=ALICE, memory=listed[0])
    assert "Forgotten." in gone.text
    assert await cli_listed_ids(runtime, capsys) == listed[1:]
