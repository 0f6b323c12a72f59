"""`personae sync-commands` against the fake Discord: a guild the bot is not in is one line naming the
fix, and publishing warns about nothing the bot does not do."""

from __future__ import annotations

import logging

import discord
import pytest

from bot.cli.discord_bot import publish_commands
from bot.cli.output import CommandError
from testkit.fake_discord import APP_ID, FakeDiscord
from tests.bot.test_command_tree import PUBLISHED

# What Discord answers for the commands of a guild the bot can't reach.
REFUSALS = {
    1: (403, 50001, "Missing Access"),
    2: (404, 10004, "Unknown Guild"),
    3: (401, 0, "401: Unauthorized"),
}


@pytest.mark.parametrize("guild", sorted(REFUSALS))
async def test_a_guild_out_of_reach_is_one_line_naming_the_fix(
    discord_world: FakeDiscord, guild: int
) -> None:
    discord_world.fail("PUT", rf"/applications/\d+/guilds/{guild}/commands", *REFUSALS[guild])
    with pytest.raises(CommandError) as refused:
        await publish_commands("a-token", guild)
    message = str(refused.value)
    assert "\n" not in message
    assert f"guild {guild}" in message and "applications.commands" in message and "check the id" in message
    assert f"client_id={APP_ID}" in message
    assert ("PUT", f"/applications/{APP_ID}/guilds/{guild}/commands") in [
        (r.method, r.path) for r in discord_world.requests
    ]


async def test_publishing_warns_about_nothing(
    discord_world: FakeDiscord, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As in a fresh process without the voice libraries: the bot never joins voice, so no warning.
    monkeypatch.setattr(discord.VoiceClient, "warn_nacl", True)
    monkeypatch.setattr(discord.VoiceClient, "warn_dave", True)
    with caplog.at_level(logging.WARNING):
        names = await publish_commands("a-token", 42)
    assert sorted(names) == PUBLISHED
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
