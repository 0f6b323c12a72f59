"""/personality export format:png on the fake Discord (issue 34): the card goes back in the picture
it came in, kept at /personality import; a personality made without a card gets the plain picture."""

from __future__ import annotations

import io

from PIL import Image

from bot.runtime import Runtime
from memory.owners.cards import parse_card
from testkit.card_uploads import OWNER, import_card
from testkit.fake_discord import FakeDiscord
from tests.memory.owners.cards import SERAPHINA_V2, card_png, png


def _pixels(data: bytes) -> tuple[tuple[int, int], bytes]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size, image.convert("RGB").tobytes()


async def test_export_as_png_writes_the_card_into_the_picture_it_came_in(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    imported = await import_card(fake_discord, card_png(SERAPHINA_V2), "seraphina.png")
    assert "Imported **Seraphina**" in imported.text

    exported = await fake_discord.command(
        "personality export", user=OWNER, personality="seraphina", format="png"
    )
    assert exported.text.startswith(
        "**Seraphina** as a Character Card V2 in the picture its card came in (PNG"
    )
    [file] = exported.reply.attachments
    assert file.filename == "seraphina.png"
    assert _pixels(file.data) == _pixels(png())  # the card's own picture, not the 64x64 placeholder
    assert parse_card(file.data).fields.first_mes == SERAPHINA_V2["data"]["first_mes"]

    as_json = await fake_discord.command("personality export", user=OWNER, personality="seraphina")
    assert [f.filename for f in as_json.reply.attachments] == ["seraphina.json"]  # JSON stays the default


async def test_export_as_png_of_a_personality_without_a_card_uses_the_plain_picture(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await fake_discord.command(
        "personality create", user=OWNER, name="plain", display_name="Plain", prompt="You are plain."
    )
    exported = await fake_discord.command("personality export", user=OWNER, personality="plain", format="png")
    assert "in a plain picture (PNG" in exported.text
    [file] = exported.reply.attachments
    size, rgb = _pixels(file.data)
    assert size == (64, 64) and set(rgb) == {0x8A, 0x8F, 0x99}
