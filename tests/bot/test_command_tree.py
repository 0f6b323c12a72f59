"""The whole slash-command tree, as `personae sync-commands` would send it to Discord."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import discord
from discord import app_commands

from testkit.fake_discord import APP_ID, TOKEN, FakeDiscord

NAME = re.compile(r"^[-_\w]{1,32}$")
# Each group's subcommands in the order they are published.
ORDER = {
    "memory": [
        "status",
        "settings",
        "fresh",
        "incognito",
        "browse",
        "search",
        "forget",
        "show",
        "export",
        "reset",
    ],
    "persona": ["set", "show", "clear"],
    "personality": [
        "create",
        "edit",
        "info",
        "list",
        "delete",
        "import",
        "export",
        "memory",
        "summarizer-model",
        "summarizer-prompt",
        "resummarize",
        "activate",
        "deactivate",
        "lore",
    ],
}
EXPECTED = {group: set(names) for group, names in ORDER.items()}
# Right-click a message, Apps: message context menus, published beside the slash commands.
MESSAGE_MENUS = ["Forget this", "Remember this"]
PUBLISHED = sorted([*MESSAGE_MENUS, *ORDER])


def walk(command: Any) -> Iterator[Any]:
    yield command
    if isinstance(command, app_commands.Group):
        for child in command.commands:
            yield from walk(child)


def payload_chars(payload: dict[str, Any]) -> int:
    """Discord's 4000-character budget: names, descriptions and choice names/values, recursively."""
    total = len(payload.get("name", "")) + len(payload.get("description", ""))
    for choice in payload.get("choices", []):
        total += len(choice["name"]) + len(str(choice["value"]))
    return total + sum(payload_chars(o) for o in payload.get("options", []))


async def test_tree_is_valid_for_discord(fake_discord: FakeDiscord) -> None:
    tree = fake_discord.bot.tree
    top = tree.get_commands(type=discord.AppCommandType.chat_input)
    names = [c.name for c in top]
    assert len(names) == len(set(names)) <= 100
    menus = tree.get_commands(type=discord.AppCommandType.message)
    assert sorted(menu.name for menu in menus) == MESSAGE_MENUS
    assert all(1 <= len(menu.name) <= 32 for menu in menus) and len(menus) <= 5
    for group_name, expected in EXPECTED.items():
        group = tree.get_command(group_name)
        assert isinstance(group, app_commands.Group), group_name
        assert {c.name for c in group.commands} == expected
    for root in top:
        payload = root.to_dict(tree)
        assert payload_chars(payload) <= 4000, root.name
        for command in walk(root):
            assert NAME.match(command.name) and command.name == command.name.lower(), command.name
            assert 1 <= len(command.description) <= 100, command.qualified_name
            if isinstance(command, app_commands.Group):
                children = [c.name for c in command.commands]
                assert len(children) == len(set(children)) <= 25, command.qualified_name
                continue
            params = command.parameters
            assert len(params) <= 25
            assert len({p.display_name for p in params}) == len(params)
            required_seen_after_optional = False
            for index, param in enumerate(params):
                where = f"/{command.qualified_name} {param.display_name}"
                assert NAME.match(param.display_name), where
                assert 1 <= len(param.description) <= 100, where
                assert param.description != "…", f"{where} has no description"
                if param.display_name == "personality":
                    assert param.autocomplete, f"{where} should autocomplete"
                if param.required and any(not p.required for p in params[:index]):
                    required_seen_after_optional = True
            assert not required_seen_after_optional, command.qualified_name


async def test_sync_publishes_the_tree_to_one_guild(fake_discord: FakeDiscord) -> None:
    from bot.client import sync_command_tree

    names = await sync_command_tree(fake_discord.bot, 4242)
    assert sorted(names) == PUBLISHED
    [(route, commands)] = fake_discord.synced.items()
    assert route.endswith("guilds/4242/commands")
    personality = next(c for c in commands if c["name"] == "personality")
    assert {o["name"] for o in personality["options"]} == EXPECTED["personality"]


async def test_publishing_needs_no_runtime(discord_world: FakeDiscord) -> None:
    """`personae sync-commands` publishes the slash commands without the database or the index."""
    from bot.client import CommandPublisher, sync_command_tree

    async with CommandPublisher() as client:
        await client.login(TOKEN)  # loads the slash-command extensions
        assert not hasattr(client, "runtime")
        names = await sync_command_tree(client, None)
        assert sorted(names) == PUBLISHED
        [(route, commands)] = discord_world.synced.items()
        assert route.endswith(f"applications/{APP_ID}/commands")
        for command in commands:
            if command["name"] in MESSAGE_MENUS:
                assert command["type"] == discord.AppCommandType.message.value and not command.get("options")
                continue
            assert [o["name"] for o in command["options"]] == ORDER[command["name"]]
