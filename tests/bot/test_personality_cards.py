"""/personality import and export through the real command tree: a card attached as a user attaches it,
the real services behind, and Discord's CDN and application emojis answered as Discord answers them."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from PIL import Image
from sqlalchemy import func, select

from memory.owners.cards import MAX_CARD_FILE_BYTES
from models import Personality
from tests.bot.interactions import EPHEMERAL, DiscordHarness, Invocation, open_harness
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

OWNER = 101
OTHER = 102
ICON = "https://img.example/seraphina-icon.png"


class _CdnResponse:
    def __init__(self, body: bytes | None) -> None:
        self.status = 200 if body is not None else 404
        self.reason = "OK" if body is not None else "Not Found"
        self._body = body or b""

    async def read(self) -> bytes:
        return self._body

    async def __aenter__(self) -> _CdnResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


@dataclass
class DiscordMedia:
    """Discord's CDN (attachments a user uploaded) and the application's emoji store, over the harness."""

    harness: DiscordHarness
    files: dict[str, bytes] = field(default_factory=dict)
    emojis: list[dict[str, Any]] = field(default_factory=list)
    refuse_emojis: bool = False

    def __post_init__(self) -> None:
        http = self.harness.http
        answer = http._answer

        def with_emojis(method: str, parts: list[str], payload: Any, files: list[Any]) -> tuple[int, Any]:
            if parts[0] == "applications" and parts[-1] == "emojis" and method == "POST":
                if self.refuse_emojis:
                    return 400, {"message": "Maximum number of emojis reached (2000)", "code": 30018}
                emoji = {"id": str(http.next_id()), "name": payload["name"], "animated": False}
                self.emojis.append({**emoji, "image": payload["image"]})
                return 200, {
                    **emoji,
                    "require_colons": True,
                    "managed": False,
                    "available": True,
                    "roles": [],
                }
            if parts[0] == "applications" and parts[-2] == "emojis":
                found = [e for e in self.emojis if e["id"] == parts[-1]]
                if not found:
                    return 404, {"message": "Unknown Emoji", "code": 10014}
                if method == "DELETE":
                    self.emojis.remove(found[0])
                    return 204, None
                emoji = {k: v for k, v in found[0].items() if k != "image"}
                return 200, {
                    **emoji,
                    "require_colons": True,
                    "managed": False,
                    "available": True,
                    "roles": [],
                }
            return answer(method, parts, payload, files)

        http._answer = with_emojis  # type: ignore[method-assign]
        http.get = lambda url, **_: _CdnResponse(self.files.get(url))  # type: ignore[attr-defined]

    async def import_card(
        self,
        data: bytes,
        filename: str = "card.png",
        *,
        user: int = OWNER,
        size: int | None = None,
        **options: Any,
    ) -> Invocation:
        """/personality import with `data` attached, as the Discord client sends an attachment option."""
        harness = self.harness
        payload = harness._base(2, user=user, guild=None, channel=500, permissions=0)
        attachment_id = str(harness.http.next_id())
        payload["data"] = harness._command_options(
            "personality import", {"card": attachment_id, **options}, None
        )
        url = f"https://cdn.discordapp.com/attachments/500/{attachment_id}/{filename}?ex=6f00&is=6e00&hm=ab"
        self.files[url] = data
        payload["data"]["resolved"] = {
            "attachments": {
                attachment_id: {
                    "id": attachment_id,
                    "filename": filename,
                    "size": len(data) if size is None else size,
                    "url": url,
                    "proxy_url": url,
                }
            }
        }
        return await harness._run_command(payload)


@pytest.fixture
async def media(runtime: Any) -> AsyncIterator[DiscordMedia]:
    async with open_harness(runtime) as harness:
        yield DiscordMedia(harness)


async def personalities(runtime: Any) -> list[Personality]:
    async with runtime.sessionmaker() as session:
        return list((await session.scalars(select(Personality).order_by(Personality.name))).all())


def uploaded_picture(emoji: dict[str, Any]) -> Image.Image:
    prefix = "data:image/png;base64,"
    assert emoji["image"].startswith(prefix)
    data = base64.b64decode(emoji["image"][len(prefix) :])
    assert len(data) <= 256 * 1024
    return Image.open(io.BytesIO(data))


async def test_a_png_card_becomes_a_personality_with_its_picture_as_avatar(
    media: DiscordMedia, runtime: Any
) -> None:
    reply = await media.import_card(card_png(SERAPHINA_V2), "seraphina.png")
    assert reply.reply.ephemeral
    assert reply.text.startswith("Imported **Seraphina** (`seraphina`) from a V2 card: its prompt is ")
    assert "Avatar: the card's picture." in reply.text
    [emoji] = media.emojis
    with uploaded_picture(emoji) as picture:
        assert picture.size == (4, 3)  # small already: kept as it is
    [p] = await personalities(runtime)
    assert p.owner_id == str(OWNER)
    assert (
        p.avatar_url == f"https://cdn.discordapp.com/emojis/{emoji['id']}.png"
    )  # permanent, unlike the attachment
    assert p.system_prompt.startswith("Write Seraphina's next reply in a gentle fantasy roleplay.")
    assert p.card is not None and p.card["first_mes"] == SERAPHINA_V2["data"]["first_mes"]

    info = await media.harness.command("personality info", user=OWNER, personality="seraphina")
    assert "Seraphina" in info.text


async def test_a_v3_png_with_a_name_and_a_refused_upload_falls_back_to_the_cards_icon(
    media: DiscordMedia, runtime: Any
) -> None:
    media.refuse_emojis = True
    card = v3(SERAPHINA_V2, assets=[{"type": "icon", "uri": ICON, "name": "main"}])
    data = png(text_chunk("chara", encoded(SERAPHINA_V2)), text_chunk("ccv3", encoded(card), b"iTXt"))
    reply = await media.import_card(data, name="Sera")
    assert "Imported **Seraphina** (`sera`) from a V3 card" in reply.text
    assert (
        "Avatar: the card's avatar URL (Discord refused to store the card's picture (Maximum number"
        in reply.text
    )
    [p] = await personalities(runtime)
    assert (p.name, p.avatar_url) == ("sera", ICON)


async def test_a_json_card_has_no_picture_and_a_picture_that_does_not_decode_is_said(
    media: DiscordMedia, runtime: Any
) -> None:
    reply = await media.import_card(json.dumps(SERAPHINA_V2).encode(), "seraphina.json")
    assert "No avatar; set one with `/personality edit`." in reply.text
    # Another character: a second Seraphina would read like the first (refused as a look-alike).
    aurora = encoded(with_data(SERAPHINA_V2, name="Aurora"))
    broken_picture = SIGNATURE + chunk(b"IHDR", b"\x00" * 13) + text_chunk("chara", aurora)
    broken_picture += chunk(b"IEND", b"")
    second = await media.import_card(broken_picture, name="second")
    assert "No avatar (the card's picture could not be read)" in second.text
    assert media.emojis == []
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
    media: DiscordMedia, runtime: Any, data: bytes, size: int | None, message: str
) -> None:
    reply = await media.import_card(data, size=size)
    assert reply.reply.ephemeral
    assert message in reply.text and "\n" not in reply.text
    assert await personalities(runtime) == []
    assert media.emojis == []


async def test_a_taken_name_is_refused(media: DiscordMedia, runtime: Any) -> None:
    await media.harness.command(
        "personality create", user=OTHER, name="Seraphina", display_name="Mine", prompt="You are mine."
    )
    reply = await media.import_card(card_png(SERAPHINA_V2), user=OWNER)
    assert reply.reply.ephemeral
    assert "A personality named 'seraphina' already exists; pick another name." in reply.text
    [p] = await personalities(runtime)
    assert (p.owner_id, p.system_prompt) == (str(OTHER), "You are mine.")
    assert media.emojis == []


async def test_export_gives_the_owner_a_card_that_imports_back(media: DiscordMedia, runtime: Any) -> None:
    await media.import_card(card_png(SERAPHINA_V2))
    refused = await media.harness.command("personality export", user=OTHER, personality="seraphina")
    assert refused.reply.ephemeral and "Only the owner of Seraphina" in refused.text
    assert refused.reply.attachments == []

    exported = await media.harness.command("personality export", user=OWNER, personality="seraphina")
    assert exported.reply.flags & EPHEMERAL
    [file] = exported.reply.attachments
    assert file.filename == "seraphina.json"
    card = json.loads(file.data)
    assert card["spec"] == "chara_card_v2" and card["avatar"].startswith("https://cdn.discordapp.com/emojis/")
    assert {k: card["data"][k] for k in SERAPHINA_V2["data"]} == SERAPHINA_V2["data"]

    [original] = await personalities(runtime)
    await runtime.personalities.delete("seraphina", actor=None)  # beside it, a copy would read like it
    again = await media.import_card(file.data, "seraphina.json", name="Seraphina Two")
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
    media: DiscordMedia, runtime: Any
) -> None:
    await media.import_card(card_png(SERAPHINA_V2), "seraphina.png")
    media.emojis.append({"id": "777", "name": "not_ours", "animated": False, "image": ""})
    [_, other] = media.emojis
    asked = await media.harness.command("personality delete", user=OWNER, personality="seraphina")
    await media.harness.click(asked.reply, "Delete", user=OWNER)
    assert "Deleted **Seraphina**" in asked.reply.content
    assert media.emojis == [other]  # only the card's own emoji goes
