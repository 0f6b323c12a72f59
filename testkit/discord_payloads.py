"""Discord's JSON as its API and gateway send it: users, members, guilds, channels, messages and
interactions, built from plain ids (for the fake Discord in testkit.fake_discord)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import discord

EPHEMERAL = 1 << 6
LOADING = 1 << 7
TIMESTAMP = "2024-01-01T00:00:00+00:00"

# Channel types, as the API numbers them.
GUILD_TEXT = 0
DM = 1
PUBLIC_THREAD = 11


def user(user_id: int, name: str | None = None, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": name or f"user{user_id}",
        "global_name": None,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
    }


def member(
    user_id: int, name: str | None = None, *, bot: bool = False, roles: Sequence[int] = ()
) -> dict[str, Any]:
    return {
        "user": user(user_id, name, bot=bot),
        "roles": [str(r) for r in roles],
        "joined_at": TIMESTAMP,
        "deaf": False,
        "mute": False,
        "flags": 0,
    }


def role(role_id: int, name: str, permissions: discord.Permissions, position: int = 0) -> dict[str, Any]:
    return {
        "id": str(role_id),
        "name": name,
        "permissions": str(permissions.value),
        "position": position,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }


def channel(
    channel_id: int,
    *,
    kind: int,
    guild_id: int | None = None,
    name: str = "general",
    parent_id: int | None = None,
    overwrites: list[dict[str, Any]] | None = None,
    recipient: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"id": str(channel_id), "type": kind}
    if kind == DM:
        data["recipients"] = [recipient] if recipient else []
        return data
    data |= {
        "guild_id": str(guild_id),
        "name": name,
        "position": 0,
        "permission_overwrites": overwrites or [],
        "nsfw": False,
        "parent_id": str(parent_id) if parent_id else None,
    }
    if kind == PUBLIC_THREAD:
        data |= {
            "owner_id": str(recipient["id"]) if recipient else None,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": TIMESTAMP,
                "locked": False,
            },
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
        }
    return data


def guild(
    guild_id: int,
    *,
    name: str,
    owner_id: int,
    roles: list[dict[str, Any]],
    channels: list[dict[str, Any]],
    threads: list[dict[str, Any]],
    members: list[dict[str, Any]],
) -> dict[str, Any]:
    """A GUILD_CREATE's guild: everything the bot caches of it."""
    return {
        "id": str(guild_id),
        "name": name,
        "owner_id": str(owner_id),
        "roles": roles,
        "channels": channels,
        "threads": threads,
        "members": members,
        "member_count": len(members),
        "features": [],
        "emojis": [],
        "stickers": [],
        "unavailable": False,
    }


def message(
    message_id: int,
    *,
    channel_id: int,
    content: str,
    author: dict[str, Any],
    timestamp: str = TIMESTAMP,
    **fields: Any,
) -> dict[str, Any]:
    """A message as the API returns it and MESSAGE_CREATE carries it; `fields` add or replace."""
    return {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "type": 0,
        "content": content,
        "author": author,
        "attachments": [],
        "embeds": [],
        "mentions": [],
        "mention_roles": [],
        "pinned": False,
        "mention_everyone": False,
        "tts": False,
        "timestamp": timestamp,
        "edited_timestamp": None,
        "flags": 0,
        "components": [],
        **fields,
    }


def command_data(
    command: Any, names: list[str], options: dict[str, Any], focused: str | None, command_id: int
) -> dict[str, Any]:
    """The `data` of an application command interaction for `command` (the leaf of `names`)."""
    params = {p.display_name: p for p in command.parameters}
    leaf = []
    for option, value in options.items():
        assert option in params, f"/{' '.join(names)} has no option {option!r}"
        entry: dict[str, Any] = {"name": option, "type": params[option].type.value, "value": value}
        if option == focused:
            entry["focused"] = True
        leaf.append(entry)
    nested: list[dict[str, Any]] = leaf
    for depth in range(len(names) - 1, 0, -1):
        nested = [{"name": names[depth], "type": 1 if depth == len(names) - 1 else 2, "options": nested}]
    return {"id": str(command_id), "name": names[0], "type": 1, "options": nested}
