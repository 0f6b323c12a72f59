"""Character cards in and out of Discord: /personality import and export (a part of PersonalityCog).

A card imported from a PNG brings the character's picture. Discord's attachment links expire within
a day, so the picture is not used through the attachment's URL: it is shrunk and stored as one of the
bot's application emojis, whose CDN address is permanent, and that address is the avatar. Where that
cannot be done (the picture does not decode, Discord refuses the upload), the card's own https avatar
URL is used if it names one, else the personality has no avatar, and the reply says why.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import secrets
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands

from bot.interactions import Interaction, user_id_of
from bot.messages import DISCORD_LIMIT
from bot.slash_commands import PersonaeCog, command
from memory.errors import InvalidInputError, UserFacingError
from memory.owners.card_pictures import CardPictures, import_card
from memory.owners.card_png import plain_picture
from memory.owners.cards import MAX_CARD_FILE_BYTES, V3, export_card, export_png, parse_card
from memory.owners.personality_fields import MAX_DISPLAY_NAME_LENGTH, MAX_NAME_LENGTH

if TYPE_CHECKING:
    from bot.client import PersonaeBot
    from memory.owners.cards import ParsedCard

log = logging.getLogger(__name__)

# An application emoji is at most 256 KiB; a 256-pixel square is already more than an avatar shows.
MAX_EMOJI_BYTES = 256 * 1024
AVATAR_SIDES = (256, 128)
# Decoding is what a picture costs: a card's is a portrait, a few megapixels at most.
MAX_PICTURE_PIXELS = 4096 * 4096
# The emojis this cog makes are named so, and their CDN address is the avatar it stores.
CARD_EMOJI_PREFIX = "card_"
EMOJI_URL = re.compile(r"https://cdn\.discordapp\.com/emojis/(?P<id>\d{1,20})\.(?:png|webp|gif)")


def avatar_image(picture: bytes) -> bytes:
    """The picture as a PNG small enough for an application emoji; ValueError if it cannot be."""
    from PIL import Image

    with Image.open(io.BytesIO(picture)) as image:
        if image.width * image.height > MAX_PICTURE_PIXELS:
            raise ValueError(f"the picture is over {MAX_PICTURE_PIXELS:,} pixels")
        image.load()
        for side in AVATAR_SIDES:
            small = image.convert("RGBA")
            small.thumbnail((side, side))
            out = io.BytesIO()
            small.save(out, format="PNG", optimize=True)
            if out.tell() <= MAX_EMOJI_BYTES:
                return out.getvalue()
    raise ValueError("the picture does not shrink under 256 KiB")


async def read_attachment(interaction: Interaction, file: discord.Attachment, what: str) -> bytes:
    """The file's bytes, refused past a card's size; the answer deferred, as downloading takes time."""
    if file.size > MAX_CARD_FILE_BYTES:
        raise InvalidInputError(f"{what} is over {MAX_CARD_FILE_BYTES // 2**20} MiB.")
    await interaction.response.defer(ephemeral=True, thinking=True)
    try:
        return await file.read()
    except discord.HTTPException as exc:
        raise UserFacingError(f"Could not download {file.filename} ({exc.status}).") from None


async def release_card_avatar(bot: PersonaeBot, avatar_url: str | None) -> None:
    """Delete the application emoji that hosted a card's picture, once its personality is gone: an
    application holds at most 2,000, and nothing else uses it. Any other avatar is left alone."""
    match = EMOJI_URL.fullmatch(avatar_url or "")
    if match is None:
        return
    try:
        emoji = await bot.fetch_application_emoji(int(match["id"]))
        if emoji.name.startswith(CARD_EMOJI_PREFIX):
            await emoji.delete()
    except discord.HTTPException as exc:
        # The personality is deleted either way; a leftover emoji costs only a slot.
        log.warning("Could not delete the card avatar emoji %s: %s", match["id"], exc)


class CardCommands(PersonaeCog):
    """/personality import and export (a part of PersonalityCog); card rules: memory.owners.cards."""

    async def _host_picture(self, picture: bytes) -> tuple[str | None, str]:
        """(avatar URL, what the reply says about it): the picture stored as an application emoji."""
        from PIL import Image

        try:
            image = await asyncio.to_thread(avatar_image, picture)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
            log.info("A card's picture could not be made an avatar: %s", exc)
            return None, "the card's picture could not be read"
        try:
            emoji = await self.bot.create_application_emoji(
                name=f"{CARD_EMOJI_PREFIX}{secrets.token_hex(8)}", image=image
            )
        except discord.HTTPException as exc:
            log.warning("Discord refused a card's picture as an application emoji: %s", exc)
            return None, f"Discord refused to store the card's picture ({exc.text or exc.status})"
        return emoji.url, "the card's picture"

    async def _avatar(self, card: ParsedCard) -> tuple[str | None, str]:
        problem = ""
        if card.image is not None:
            url, said = await self._host_picture(card.image)
            if url is not None:
                return url, f"Avatar: {said}."
            problem = f" ({said})"
        if card.avatar_url is not None:
            return card.avatar_url, f"Avatar: the card's avatar URL{problem}."
        return None, f"No avatar{problem}; set one with `/personality edit`."

    @command(
        "import",
        "Create a personality you own from a character card",
        card="A Character Card V2 or V3: a .png with the card in it, or its .json",
        name="Short unique name used in commands (default: from the card's name)",
        display_name="Name its replies are posted under (default: the card's)",
    )
    async def card_import(
        self,
        interaction: Interaction,
        card: discord.Attachment,
        name: app_commands.Range[str, 1, MAX_NAME_LENGTH] | None = None,
        display_name: app_commands.Range[str, 1, MAX_DISPLAY_NAME_LENGTH] | None = None,
    ) -> None:
        data = await read_attachment(interaction, card, "The card file")
        parsed = await asyncio.to_thread(parse_card, data)  # up to 8 MiB to check: off the event loop
        service, uid = self.runtime.personalities, user_id_of(interaction)
        pictures = CardPictures(self.runtime.sessionmaker)
        imported = await import_card(
            service, pictures, parsed, name=name, owner_id=uid, by_operator=False, display_name=display_name
        )
        p = imported.personality
        url: str | None = None
        try:
            url, avatar_said = await self._avatar(parsed)
            if url is not None:
                p = await service.edit(p.name, actor=uid, avatar_url=url)
        except Exception:  # a failed import keeps nothing: neither the personality nor its picture
            await release_card_avatar(self.bot, url)
            await service.delete(p.name, actor=uid)
            raise
        # The CLI's lines, aligned as it prints them; a card's own ``` would end the block early.
        report = "\n".join(imported.report.lines()).replace("```", "'''")
        said = (
            f"Imported **{p.display_name}** (`{p.name}`) from a {parsed.version} card: its prompt is "
            f"{len(p.system_prompt):,} characters.\n```\n{report}\n```\n{avatar_said} Talk to it by name, "
            "or bind it to a channel with `/personality activate`."
        )
        if len(said) > DISCORD_LIMIT:  # a card with hundreds of fields: the report's end goes
            said = said.replace(report, report[: len(report) - (len(said) - DISCORD_LIMIT) - 1] + "…")
        await interaction.followup.send(said, ephemeral=True)

    @command(
        "export",
        "Download a personality you own as a character card",
        personality="The personality to export (V3 if it came as V3, else V2)",
        image="A PNG to put the card in, as SillyTavern does",
        format="png: the card in a picture (yours, else the one its card came in); default json",
    )
    async def card_export(
        self,
        interaction: Interaction,
        personality: str,
        image: discord.Attachment | None = None,
        format: Literal["json", "png"] | None = None,
    ) -> None:
        service = self.runtime.personalities
        p = await service.get(personality)
        service.require_manager(p, user_id_of(interaction), "export its card")  # the card holds its prompt
        card = export_card(p)
        version = "V3" if card["spec"] == V3 else "V2"
        picture: bytes | None = None
        if image is not None:
            picture, whose = await read_attachment(interaction, image, "The picture"), "your picture"
        elif format == "png":
            # The picture its card came in (kept at import), else the plain placeholder.
            picture = await CardPictures(self.runtime.sessionmaker).get(p.id)
            whose = "the picture its card came in" if picture else "a plain picture"
            picture = picture or plain_picture()
        if picture is None:
            data, filename = json.dumps(card, ensure_ascii=False, indent=2).encode(), f"{p.name}.json"
            said = f"**{p.display_name}** as a Character Card {version} (JSON)."
        else:
            data, filename = await asyncio.to_thread(export_png, p, picture), f"{p.name}.png"
            said = (
                f"**{p.display_name}** as a Character Card {version} in {whose} (PNG, with the card "
                "as V2 and V3 for every reader)."
            )
        file = discord.File(io.BytesIO(data), filename=filename)
        if interaction.response.is_done():
            await interaction.followup.send(said, file=file, ephemeral=True)
        else:
            await interaction.response.send_message(said, file=file, ephemeral=True)
