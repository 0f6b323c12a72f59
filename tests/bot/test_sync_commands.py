"""`personae sync-commands` against a stand-in for Discord's HTTP API on 127.0.0.1: a guild the bot is
not in is one line naming the fix, and publishing warns about nothing the bot does not do."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest
from aiohttp import web

from bot.cli.discord_bot import publish_commands
from bot.cli.output import CommandError
from tests.bot.test_command_tree import PUBLISHED

APP_ID = "710000000000000001"
USER = {"id": "710000000000000002", "username": "Personae", "discriminator": "0", "avatar": None, "bot": True}
# What Discord answers for the commands of a guild the bot can't reach.
REFUSALS = {
    1: (403, {"message": "Missing Access", "code": 50001}),
    2: (404, {"message": "Unknown Guild", "code": 10004}),
    3: (401, {"message": "401: Unauthorized", "code": 0}),
}


def answer(body: Any, status: int = 200) -> web.Response:
    # Exactly Discord's content type: discord.py reads JSON only when it is "application/json".
    return web.Response(
        body=json.dumps(body).encode(), status=status, headers={"Content-Type": "application/json"}
    )


@pytest.fixture
async def discord_api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[str]]:
    """Discord's API for login and publishing; returns the paths it was asked for."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        path = request.path.removeprefix("/api/v10")
        if path == "/users/@me":
            return answer(USER)
        if path == "/oauth2/applications/@me":
            app: dict[str, Any] = {"id": APP_ID, "name": "Personae", "description": "", "icon": None}
            app |= {"bot_public": True, "bot_require_code_grant": False, "verify_key": "k", "owner": USER}
            return answer(app)
        guild = int(request.match_info.get("guild", "0"))
        if guild in REFUSALS:
            status, body = REFUSALS[guild]
            return answer(body, status)
        commands = await request.json()
        # As Discord does, a context menu comes back with an empty description.
        return answer(
            [{"description": "", **c, "id": "1", "application_id": APP_ID, "version": "1"} for c in commands]
        )

    app = web.Application()
    app.router.add_route("*", "/api/v10/applications/{app}/guilds/{guild}/commands", handle)
    app.router.add_route("*", "/api/v10/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    monkeypatch.setattr(discord.http.Route, "BASE", f"http://127.0.0.1:{port}/api/v10")
    yield seen
    await runner.cleanup()


@pytest.mark.parametrize("guild", sorted(REFUSALS))
async def test_a_guild_out_of_reach_is_one_line_naming_the_fix(discord_api: list[str], guild: int) -> None:
    with pytest.raises(CommandError) as refused:
        await publish_commands("a-token", guild)
    message = str(refused.value)
    assert "\n" not in message
    assert f"guild {guild}" in message and "applications.commands" in message and "check the id" in message
    assert f"client_id={APP_ID}" in message
    assert f"PUT /api/v10/applications/{APP_ID}/guilds/{guild}/commands" in discord_api


async def test_publishing_warns_about_nothing(
    discord_api: list[str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As in a fresh process without the voice libraries: the bot never joins voice, so no warning.
    monkeypatch.setattr(discord.VoiceClient, "warn_nacl", True)
    monkeypatch.setattr(discord.VoiceClient, "warn_dave", True)
    with caplog.at_level(logging.WARNING):
        names = await publish_commands("a-token", 42)
    assert sorted(names) == PUBLISHED
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
