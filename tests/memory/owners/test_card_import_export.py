"""Character cards into personalities and back: import creates the personality (or refuses, leaving
nothing behind), export -> import gives back the same personality, V3 field by field, JSON or PNG."""

from __future__ import annotations

import base64
import json
import struct

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError, PermissionDeniedError
from memory.owners.cards import create_from_card, export_card, export_png, parse_card
from memory.owners.personalities import PersonalityService
from memory.owners.personality_fields import MAX_PROMPT_LENGTH
from models import Personality
from tests.memory.owners.cards import (
    SERAPHINA_PROMPT,
    SERAPHINA_V2,
    SERAPHINA_V3,
    SERAPHINA_V3_DATA,
    SIGNATURE,
    as_json,
    encoded,
    png,
    text_chunk,
    with_data,
)


async def _count(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    async with sessionmaker() as session:
        return int(await session.scalar(select(func.count()).select_from(Personality)) or 0)


async def test_import_creates_the_personality_and_export_round_trips(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    card = parse_card(as_json({**SERAPHINA_V2, "avatar": "https://img.example/s.png"}))
    imported = await create_from_card(
        service, card, owner_id="7", by_operator=True, avatar_url=card.avatar_url
    )
    p = await service.get("seraphina")
    assert imported.personality.id == p.id
    assert (p.display_name, p.owner_id, p.avatar_url) == ("Seraphina", "7", "https://img.example/s.png")
    assert p.system_prompt == SERAPHINA_PROMPT
    assert p.card is not None and p.card["spec"] == "chara_card_v2"
    assert p.card["first_mes"] == SERAPHINA_V2["data"]["first_mes"] and "name" not in p.card

    exported = export_card(p)
    assert exported["spec"] == "chara_card_v2" and exported["avatar"] == "https://img.example/s.png"
    for field, value in SERAPHINA_V2["data"].items():
        assert exported["data"][field] == value, field

    await service.delete("seraphina", actor=None)  # beside it, a copy would read like it: refused
    again = await create_from_card(
        service, parse_card(as_json(exported)), name="Seraphina Copy", by_operator=True
    )
    copy = again.personality
    assert (copy.name, copy.display_name, copy.system_prompt) == (
        "seraphina-copy",
        "Seraphina",
        p.system_prompt,
    )
    assert copy.card == p.card


async def test_an_edited_prompt_is_exported_as_the_cards_system_prompt(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    await create_from_card(service, parse_card(as_json(SERAPHINA_V2)), by_operator=True)
    edited = await service.edit("seraphina", actor=None, prompt="You are Seraphina, now terse.")
    data = export_card(edited)["data"]
    assert data["system_prompt"] == "You are Seraphina, now terse."
    assert data["description"] == data["mes_example"] == ""  # they are in the prompt the owner edited
    assert data["first_mes"] == SERAPHINA_V2["data"]["first_mes"]
    await service.delete("seraphina", actor=None)  # beside it, a copy would read like it: refused
    copy = await create_from_card(
        service, parse_card(as_json({"spec": "chara_card_v2", "data": data})), name="c", by_operator=True
    )
    assert copy.personality.system_prompt == "You are Seraphina, now terse."

    plain, _ = await service.create("Plain", prompt="Just plain.")
    assert export_card(plain)["data"]["system_prompt"] == "Just plain."


async def test_name_clash_and_user_rules_leave_nothing_behind(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker, creator_ids=["1"])
    card = parse_card(as_json(SERAPHINA_V2))
    await create_from_card(service, card, owner_id="1", by_operator=False)
    before = await _count(sessionmaker)
    with pytest.raises(InvalidInputError, match="A personality named 'seraphina' already exists"):
        await create_from_card(service, card, by_operator=True)
    with pytest.raises(InvalidInputError, match="already exists"):
        await create_from_card(service, card, owner_id="1", by_operator=False)
    with pytest.raises(PermissionDeniedError, match="restricted"):
        await create_from_card(service, card, name="other", owner_id="2", by_operator=False)
    with pytest.raises(InvalidInputError, match="The card's name 'セラ' has no letters or digits"):
        await create_from_card(
            service, parse_card(as_json(with_data(SERAPHINA_V2, name="セラ"))), by_operator=True
        )
    too_long = with_data(SERAPHINA_V2, description="d" * MAX_PROMPT_LENGTH)
    with pytest.raises(InvalidInputError, match="Shorten them"):
        await create_from_card(service, parse_card(as_json(too_long)), name="long", by_operator=True)
    assert await _count(sessionmaker) == before


async def test_text_postgres_cannot_store_is_made_storable(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    odd = with_data(SERAPHINA_V2, description="a\u0000b \ud800", extensions={"k\u0000": ["v\udfff"]})
    p = (await create_from_card(service, parse_card(as_json(odd)), by_operator=True)).personality
    stored = await service.get(p.name)
    assert "ab \ufffd" in stored.system_prompt
    assert stored.card is not None and stored.card["extensions"] == {"k": ["v\ufffd"]}


async def test_a_v3_card_exported_and_imported_again_is_equal_field_by_field(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    await create_from_card(service, parse_card(as_json(SERAPHINA_V3)), by_operator=True)
    exported = export_card(await service.get("seraphina"))
    assert (exported["spec"], exported["spec_version"]) == ("chara_card_v3", "3.0")
    assert exported["data"] == SERAPHINA_V3_DATA
    await service.delete("seraphina", actor=None)  # beside it, a copy would read like it: refused
    again = await create_from_card(service, parse_card(as_json(exported)), name="again", by_operator=True)
    assert export_card(again.personality)["data"] == SERAPHINA_V3_DATA


async def test_a_png_export_carries_the_card_as_v3_and_v2_as_sillytavern_writes_it(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    p = (await create_from_card(service, parse_card(as_json(SERAPHINA_V3)), by_operator=True)).personality
    own_picture = png(text_chunk("chara", encoded({"name": "Old card in the picture"})))
    for picture in (None, own_picture):
        data = export_png(p, picture)
        cards = {keyword: json.loads(base64.b64decode(text)) for keyword, text in _card_chunks(data)}
        assert list(cards) == ["chara", "ccv3"]  # the old card is gone, the V2 copy first
        assert cards["chara"]["spec"] == "chara_card_v2" and cards["ccv3"]["spec"] == "chara_card_v3"
        assert cards["chara"]["data"] == cards["ccv3"]["data"] == SERAPHINA_V3_DATA
        read = parse_card(data)
        assert read.spec == "chara_card_v3" and read.fields == parse_card(as_json(SERAPHINA_V3)).fields
    assert export_png(p, own_picture).startswith(own_picture[: len(SIGNATURE) + 25 + 12])  # IHDR kept
    with pytest.raises(InvalidInputError, match="The picture is not a PNG the card can go in: Not a PNG"):
        export_png(p, b"GIF89a")


def _card_chunks(data: bytes) -> list[tuple[str, str]]:
    found = []
    position = len(SIGNATURE)
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind, body = data[position + 4 : position + 8], data[position + 8 : position + 8 + length]
        if kind == b"tEXt":
            keyword, _, text = body.partition(b"\x00")
            found.append((keyword.decode(), text.decode()))
        position += 12 + length
    return found


async def test_the_import_report_says_what_is_used_and_names_what_is_not_kept(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    service = PersonalityService(sessionmaker)
    imported = await create_from_card(service, parse_card(as_json(SERAPHINA_V3)), by_operator=True)
    assert imported.report.lines() == [
        "uses:     system prompt, description, personality, scenario, 2 example dialogues, "
        "greeting (+1 alternate), lorebook (5 entries, 1 disabled), post-history instructions, "
        "depth prompt (depth 4), nickname 'Sera'",
        "not used: creator notes, translated creator notes, tags, creator, character version, "
        "group-only greetings, source, creation date, modification date, lorebook inclusion groups, "
        "other fields x_future_field, "
        "2 asset links (kept; exported back)",
        "not kept: asset emotion/happy (embeded://assets/emotion/images/happy.png): its file is not stored",
    ]
    plain = await create_from_card(service, parse_card(as_json({"name": "Bare"})), by_operator=True)
    assert plain.report.lines() == ["uses:     the default prompt"]
