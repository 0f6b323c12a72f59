"""A character card uploaded with /personality import, as the Discord client uploads an attachment
option, by the user who will own the personality."""

from __future__ import annotations

from typing import Any

from testkit.fake_discord import Attachment, FakeDiscord, Invocation

OWNER = 101  # the user who imports a card, and so owns its personality


async def import_card(
    discord: FakeDiscord,
    data: bytes,
    filename: str = "card.png",
    *,
    user: int = OWNER,
    size: int | None = None,
    **options: Any,
) -> Invocation:
    """/personality import with `data` attached, as the Discord client uploads an attachment option."""
    card = Attachment(filename, data, size)
    return await discord.command("personality import", user=user, attachments={"card": card}, **options)
