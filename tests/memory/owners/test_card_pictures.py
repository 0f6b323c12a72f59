"""The pictures cards come in (issue 34): kept at import, bounded, replaced, gone with the personality."""

from __future__ import annotations

import io

from PIL import Image
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.owners.card_pictures import MAX_CARD_PICTURE_BYTES, CardPictures, import_card
from memory.owners.cards import parse_card
from memory.owners.personalities import PersonalityService
from models import PersonalityPicture
from tests.memory.owners.cards import SERAPHINA_V2, card_png, chunk, encoded, png, text_chunk, v3


async def _pictures_stored(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    async with sessionmaker() as session:
        return int(await session.scalar(select(func.count()).select_from(PersonalityPicture)) or 0)


async def test_the_picture_is_kept_without_its_card_and_goes_with_the_personality(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service, pictures = PersonalityService(sessionmaker), CardPictures(sessionmaker)
    imported = await import_card(service, pictures, parse_card(card_png(SERAPHINA_V2)), by_operator=True)
    assert imported.picture_kept
    kept = await pictures.get(imported.personality.id)
    assert kept == png()  # the same picture, its card chunk left out: each export writes the card afresh

    exported = await pictures.export_png(imported.personality)
    assert parse_card(exported).fields.name == "Seraphina"
    with Image.open(io.BytesIO(exported)) as image:
        assert image.size == (4, 3)  # the card's picture (tests.memory.owners.cards.picture), not 64x64

    # Keeping another replaces it: one picture a personality.
    other = io.BytesIO()
    Image.new("RGB", (5, 5), (9, 9, 9)).save(other, format="PNG")
    await pictures.keep(imported.personality.id, other.getvalue())
    assert await pictures.get(imported.personality.id) == other.getvalue()
    assert await _pictures_stored(sessionmaker) == 1

    await service.delete("seraphina", actor=None)
    assert await _pictures_stored(sessionmaker) == 0


async def test_a_json_card_keeps_no_picture(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    import json

    service, pictures = PersonalityService(sessionmaker), CardPictures(sessionmaker)
    imported = await import_card(
        service, pictures, parse_card(json.dumps(SERAPHINA_V2).encode()), owner_id="5", by_operator=False
    )
    assert not imported.picture_kept
    assert await pictures.get(imported.personality.id) is None
    with Image.open(io.BytesIO(await pictures.export_png(imported.personality))) as image:
        assert image.size == (64, 64)  # the placeholder, as before


async def test_a_picture_over_the_bound_is_not_kept_and_the_report_says_so(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service, pictures = PersonalityService(sessionmaker), CardPictures(sessionmaker)
    # An ancillary chunk makes the picture alone larger than a card file may be; the file is still
    # within what a PNG card may be (its card text counted apart).
    bulky = chunk(b"prVt", bytes(MAX_CARD_PICTURE_BYTES))
    imported = await import_card(
        service,
        pictures,
        parse_card(png(bulky, text_chunk("chara", encoded(SERAPHINA_V2)))),
        by_operator=True,
    )
    assert not imported.picture_kept
    assert "its picture (over 8 MiB)" in imported.report.not_kept
    assert "not kept: its picture (over 8 MiB)" in imported.report.lines()
    assert await _pictures_stored(sessionmaker) == 0


async def test_a_file_broken_past_its_card_imports_without_its_picture(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service, pictures = PersonalityService(sessionmaker), CardPictures(sessionmaker)
    broken = bytearray(chunk(b"teXt", b"after the card"))
    broken[-1] ^= 1  # its CRC no longer matches: the card's own read never gets that far
    imported = await import_card(
        service,
        pictures,
        parse_card(png(text_chunk("ccv3", encoded(v3(SERAPHINA_V2))), bytes(broken))),
        by_operator=True,
    )
    assert imported.personality.display_name == "Seraphina" and not imported.picture_kept
    assert "its picture (the file is broken past the card)" in imported.report.not_kept
    assert await _pictures_stored(sessionmaker) == 0
