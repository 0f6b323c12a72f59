"""/personality import and export on the fake Discord: a card attached as a user attaches it, the real
services behind, and Discord's CDN and application emojis answered as Discord answers them."""

from __future__ import annotations

import base64
import io
import json
from unittest.mock import AsyncMock

import aiohttp
import pytest
from PIL import Image
from sqlalchemy import func, select

from bot.runtime import Runtime
from memory.owners.card_prompt import compose_prompt
from memory.owners.card_report import card_report
from memory.owners.cards import MAX_CARD_FILE_BYTES, parse_card
from models import Personality
from testkit.card_uploads import OWNER, import_card
from testkit.discord_payloads import EPHEMERAL
from testkit.fake_discord import Attachment, Emoji, FakeDiscord
from tests.memory.owners.cards import (
    SERAPHINA_V2,
    SIGNATURE,
    bomb_chunk,
    card_png,
    chunk,
    encoded,
    png,
    text_chunk,
    v3,
    with_data,
)

OTHER = 102
ICON = "https://img.example/seraphina-icon.png"


def refuse_emojis(discord: FakeDiscord) -> None:
    """The application has all the emojis Discord allows."""
    discord.fail("POST", r"/applications/\d+/emojis", 400, 30018, "Maximum number of emojis reached (2000)")


async def personalities(runtime: Runtime) -> list[Personality]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Personality).order_by(Personality.name))).all())


def uploaded_picture(emoji: Emoji) -> Image.Image:
    prefix = "data:image/png;base64,"
    assert emoji.image.startswith(prefix)
    data = base64.b64decode(emoji.image[len(prefix) :])
    assert len(data) <= 256 * 1024
    return Image.open(io.BytesIO(data))


async def test_a_png_card_becomes_a_personality_with_its_picture_as_avatar(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    reply = await import_card(fake_discord, card_png(SERAPHINA_V2), "seraphina.png")
    assert reply.reply.ephemeral
    assert reply.text.startswith("Imported **Seraphina** (`seraphina`) from a V2 card: its prompt is ")
    assert "Avatar: the card's picture." in reply.text
    [emoji] = fake_discord.emojis.values()
    with uploaded_picture(emoji) as picture:
        assert picture.size == (4, 3)  # small already: kept as it is
    [p] = await personalities(runtime)
    assert p.owner_id == str(OWNER)
    assert (
        p.avatar_url == f"https://cdn.discordapp.com/emojis/{emoji.id}.png"
    )  # permanent, unlike the attachment
    assert p.system_prompt.startswith("Write Seraphina's next reply in a gentle fantasy roleplay.")
    assert p.card is not None and p.card["first_mes"] == SERAPHINA_V2["data"]["first_mes"]

    info = await fake_discord.command("personality info", user=OWNER, personality="seraphina")
    assert "Seraphina" in info.text


async def test_a_v3_png_with_a_name_and_a_refused_upload_falls_back_to_the_cards_icon(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    refuse_emojis(fake_discord)
    card = v3(SERAPHINA_V2, assets=[{"type": "icon", "uri": ICON, "name": "main"}])
    data = png(text_chunk("chara", encoded(SERAPHINA_V2)), text_chunk("ccv3", encoded(card), b"iTXt"))
    reply = await import_card(fake_discord, data, name="Sera")
    assert "Imported **Seraphina** (`sera`) from a V3 card" in reply.text
    assert (
        "Avatar: the card's avatar URL (Discord refused to store the card's picture (Maximum number"
        in reply.text
    )
    [p] = await personalities(runtime)
    assert (p.name, p.avatar_url) == ("sera", ICON)


async def test_a_json_card_has_no_picture_and_a_picture_that_does_not_decode_is_said(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    reply = await import_card(fake_discord, json.dumps(SERAPHINA_V2).encode(), "seraphina.json")
    assert "No avatar; set one with `/personality edit`." in reply.text
    # Another character: a second Seraphina would read like the first (refused as a look-alike).
    aurora = encoded(with_data(SERAPHINA_V2, name="Aurora"))
    broken_picture = SIGNATURE + chunk(b"IHDR", b"\x00" * 13) + text_chunk("chara", aurora)
    broken_picture += chunk(b"IEND", b"")
    second = await import_card(fake_discord, broken_picture, name="second")
    assert "No avatar (the card's picture could not be read)" in second.text
    assert fake_discord.emojis == {}
    assert [(p.name, p.avatar_url) for p in await personalities(runtime)] == [
        ("second", None),
        ("seraphina", None),
    ]


@pytest.mark.parametrize(
    ("data", "size", "message"),
    [
        (png(bomb_chunk("chara", b"zTXt")), None, "The PNG's zTXt 'chara' chunk inflates to over 5 MiB"),
        (card_png(SERAPHINA_V2)[:-30], None, "The PNG is truncated"),
        (b'{"spec": "chara_card_v2", "data": {"name": 7}}', None, "The card's data.name must be a string."),
        (b"GIF89a", None, "The card is not valid JSON"),
        (card_png(SERAPHINA_V2), MAX_CARD_FILE_BYTES + 1, "The card file is over 8 MiB."),
    ],
    ids=["zip-bomb", "truncated", "wrong-type", "not-a-card", "too-large"],
)
async def test_broken_cards_are_one_ephemeral_line_and_make_nothing(
    fake_discord: FakeDiscord, runtime: Runtime, data: bytes, size: int | None, message: str
) -> None:
    reply = await import_card(fake_discord, data, size=size)
    assert reply.reply.ephemeral
    assert message in reply.text and "\n" not in reply.text
    assert await personalities(runtime) == []
    assert fake_discord.emojis == {}


async def test_a_taken_name_is_refused(fake_discord: FakeDiscord, runtime: Runtime) -> None:
    await fake_discord.command(
        "personality create", user=OTHER, name="Seraphina", display_name="Mine", prompt="You are mine."
    )
    reply = await import_card(fake_discord, card_png(SERAPHINA_V2), user=OWNER)
    assert reply.reply.ephemeral
    assert "A personality named 'seraphina' already exists; pick another name." in reply.text
    [p] = await personalities(runtime)
    assert (p.owner_id, p.system_prompt) == (str(OTHER), "You are mine.")
    assert fake_discord.emojis == {}


async def test_export_gives_the_owner_a_card_that_imports_back(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await import_card(fake_discord, card_png(SERAPHINA_V2))
    refused = await fake_discord.command("personality export", user=OTHER, personality="seraphina")
    assert refused.reply.ephemeral
    assert refused.text == "Only the owner of Seraphina (or a bot admin) can export its card."
    assert refused.reply.attachments == []

    exported = await fake_discord.command("personality export", user=OWNER, personality="seraphina")
    assert exported.reply.flags & EPHEMERAL
    [file] = exported.reply.attachments
    assert file.filename == "seraphina.json"
    card = json.loads(file.data)
    assert card["spec"] == "chara_card_v2" and card["avatar"].startswith("https://cdn.discordapp.com/emojis/")
    assert {k: card["data"][k] for k in SERAPHINA_V2["data"]} == SERAPHINA_V2["data"]

    [original] = await personalities(runtime)
    # Beside it, a copy under another name only would read like it: the refusal names the fix.
    alike = await import_card(fake_discord, file.data, "seraphina.json", name="sera2")
    assert alike.reply.ephemeral and "reads like the existing personality 'Seraphina'" in alike.text
    assert "`display_name:`" in alike.text
    beside = await import_card(
        fake_discord, file.data, "seraphina.json", name="sera2", display_name="Seraphina II"
    )
    assert "Imported **Seraphina II** (`sera2`)" in beside.text
    await runtime.personalities.delete("sera2", actor=None)
    await runtime.personalities.delete("seraphina", actor=None)
    again = await import_card(fake_discord, file.data, "seraphina.json", name="Seraphina Two")
    assert "Avatar: the card's avatar URL." in again.text
    [copy] = await personalities(runtime)
    assert (copy.name, copy.system_prompt, copy.card, copy.avatar_url) == (
        "seraphina-two",
        original.system_prompt,
        original.card,
        original.avatar_url,
    )
    async with runtime.sessionmaker() as session:
        assert await session.scalar(select(func.count()).select_from(Personality)) == 1


async def test_deleting_the_personality_deletes_the_emoji_that_hosted_its_picture(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    await import_card(fake_discord, card_png(SERAPHINA_V2), "seraphina.png")
    other = fake_discord.emojis[777] = Emoji(777, "not_ours", "")
    asked = await fake_discord.command("personality delete", user=OWNER, personality="seraphina")
    await fake_discord.click(asked.reply, "Delete", user=OWNER)
    assert "Deleted **Seraphina**" in asked.reply.content
    assert list(fake_discord.emojis.values()) == [other]  # only the card's own emoji goes


async def test_import_reports_what_the_card_brings_as_the_cli_does(fake_discord: FakeDiscord) -> None:
    card = v3(
        SERAPHINA_V2,
        assets=[{"type": "emotion", "uri": "embeded://assets/happy.png", "name": "happy"}],
        source=["https://cards.example/seraphina"],
        creation_date=1700000000,
        nickname="Sera```",
    )
    parsed = parse_card(json.dumps(card).encode())
    lines = card_report(parsed.fields, compose_prompt(parsed.fields, "Seraphina")).lines()
    assert any(line.startswith("not kept: asset emotion/happy") for line in lines)
    reply = await import_card(fake_discord, json.dumps(card).encode(), "seraphina.json")
    # The CLI's lines, aligned as it prints them, in a block the card's own ``` cannot end early.
    assert "```\n" + "\n".join(lines).replace("```", "'''") + "\n```" in reply.text
    assert reply.text.count("```") == 2
    assert len(reply.text) <= 2000


async def test_a_v3_card_exports_as_v3_in_json_or_in_a_png_and_imports_back_equal(
    fake_discord: FakeDiscord, runtime: Runtime
) -> None:
    card = v3(
        SERAPHINA_V2,
        nickname="Sera",
        assets=[{"type": "icon", "uri": ICON, "name": "main"}],
        source=["https://cards.example/seraphina"],
        creation_date=1700000000,
        modification_date=1700000100,
        creator_notes_multilingual={"fr": "Une gardienne."},
        group_only_greetings=[],  # required by V3: a card without it gets it on export
    )
    await import_card(fake_discord, json.dumps(card).encode(), "seraphina.json")
    as_json = await fake_discord.command("personality export", user=OWNER, personality="seraphina")
    assert as_json.text == "**Seraphina** as a Character Card V3 (JSON)."
    [file] = as_json.reply.attachments
    exported = json.loads(file.data)
    assert exported["spec"] == "chara_card_v3"
    assert {k: exported["data"][k] for k in card["data"]} == card["data"]

    not_png = await fake_discord.command(
        "personality export",
        user=OWNER,
        personality="seraphina",
        attachments={"image": Attachment("portrait.jpg", b"\xff\xd8\xff\xe0 not a png")},
    )
    assert not_png.text.startswith("The picture is not a PNG the card can go in") and "\n" not in not_png.text
    as_png = await fake_discord.command(
        "personality export",
        user=OWNER,
        personality="seraphina",
        attachments={"image": Attachment("portrait.png", png())},
    )
    assert as_png.text.startswith("**Seraphina** as a Character Card V3 in your picture (PNG")
    [picture] = as_png.reply.attachments
    assert picture.filename == "seraphina.png" and b"ccv3" in picture.data and b"chara" in picture.data

    [original] = await personalities(runtime)
    await runtime.personalities.delete("seraphina", actor=None)
    await import_card(fake_discord, picture.data, "seraphina.png")
    [copy] = await personalities(runtime)
    assert (copy.name, copy.system_prompt, copy.card) == ("seraphina", original.system_prompt, original.card)


async def test_an_unexpected_failure_while_hosting_the_picture_leaves_nothing_behind(
    fake_discord: FakeDiscord, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discord's connection dropped while the picture became an emoji: the import fails whole, no
    personality, no emoji, and the user reads one line (issue 20, 7)."""
    dropped = AsyncMock(side_effect=aiohttp.ServerDisconnectedError())
    monkeypatch.setattr(fake_discord.bot, "create_application_emoji", dropped)
    reply = await import_card(fake_discord, card_png(SERAPHINA_V2))
    dropped.assert_awaited_once()
    assert reply.reply.ephemeral and "\n" not in reply.text and "Traceback" not in reply.text
    assert await personalities(runtime) == []
    assert fake_discord.emojis == {}
    monkeypatch.undo()  # the connection is back: the same card imports
    again = await import_card(fake_discord, card_png(SERAPHINA_V2))
    assert "Imported **Seraphina**" in again.text
