"""Character cards read: V1/V2/V3 as JSON and PNG, hostile cards refused in one line, and the prompt
composed within its limit (import into personalities and export back: test_card_import_export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory.errors import InvalidInputError
from memory.owners.card_fields import MAX_CARD_DEPTH, MAX_CARD_LIST, MAX_CARD_TEXT, CardFields
from memory.owners.card_png import MAX_CARD_JSON_BYTES, MAX_PNG_CHUNKS
from memory.owners.card_prompt import compose_prompt, fill_chat_macros, fill_macros, fill_user
from memory.owners.cards import MAX_CARD_FILE_BYTES, parse_card, read_card_file
from memory.owners.personality_fields import MAX_PROMPT_LENGTH
from tests.memory.owners.cards import (
    SERAPHINA_PROMPT,
    SERAPHINA_V2,
    SIGNATURE,
    as_json,
    bomb_chunk,
    card_png,
    chunk,
    encoded,
    png,
    text_chunk,
    v3,
    with_data,
)


def test_v2_json_card_is_read_whole() -> None:
    card = parse_card(as_json(SERAPHINA_V2))
    assert card.spec == "chara_card_v2" and card.image is None and card.avatar_url is None
    assert card.version == "V2"
    f = card.fields
    assert f.name == "Seraphina"
    assert f.first_mes == "*Seraphina smiles* You're awake, {{user}}."  # kept as written, macros too
    assert (f.tags, f.creator, f.character_version) == (["fantasy", "guardian"], "tester", "1.2")
    assert f.alternate_greetings == ["*Seraphina hums* Rested, {{user}}?"]
    assert f.extensions == {"depth_prompt": {"depth": 4, "prompt": "Remember the forest."}}
    assert compose_prompt(f, "Seraphina").text == SERAPHINA_PROMPT


@pytest.mark.parametrize("kind", [b"tEXt", b"zTXt", b"iTXt"])
def test_v2_png_card_reads_as_its_json(kind: bytes) -> None:
    data = card_png(SERAPHINA_V2, "chara", kind)
    card = parse_card(data)
    assert card.fields == parse_card(as_json(SERAPHINA_V2)).fields
    assert card.image == data  # the picture, for the avatar


def test_v3_png_wins_over_the_v2_beside_it_and_names_its_avatar() -> None:
    icon = "https://img.example/seraphina.png"
    card_v3 = v3(
        SERAPHINA_V2,
        name="Seraphina III",
        nickname="Sera",
        assets=[
            {"type": "background", "uri": "https://img.example/bg.png", "name": "main"},
            {"type": "icon", "uri": "embeded://icon.png", "name": "other"},
            {"type": "icon", "uri": icon, "name": "main"},
        ],
    )
    # Writers put the V2 copy first for old readers; the V3 chunk is preferred wherever it is.
    data = png(text_chunk("chara", encoded(SERAPHINA_V2)), text_chunk("ccv3", encoded(card_v3), b"zTXt"))
    card = parse_card(data)
    assert (card.spec, card.fields.name, card.fields.nickname) == ("chara_card_v3", "Seraphina III", "Sera")
    assert card.avatar_url == icon


@pytest.mark.parametrize(
    ("avatar", "expected"),
    [
        ("https://img.example/a.png", "https://img.example/a.png"),
        ("http://img.example/a.png", None),  # avatars are https, as /personality create requires
        ("seraphina.png", None),
        (42, None),
    ],
)
def test_top_level_avatar_url_of_a_json_card(avatar: Any, expected: str | None) -> None:
    assert parse_card(as_json({**SERAPHINA_V2, "avatar": avatar})).avatar_url == expected


def test_v1_card_and_null_fields_are_accepted() -> None:
    card = parse_card(as_json({"name": "Old", "description": None, "first_mes": "Hi", "tags": None}))
    assert (card.spec, card.fields.name, card.fields.description, card.fields.tags) == (
        "chara_card_v1",
        "Old",
        "",
        [],
    )


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _cut(data: bytes, at: int) -> bytes:
    return data[:at]


def _bad_crc(data: bytes) -> bytes:
    body = bytearray(data)
    body[len(SIGNATURE) + 10] ^= 0xFF  # inside IHDR's body
    return bytes(body)


GOOD_PNG = card_png(SERAPHINA_V2)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"{not json",
            "The card is not valid JSON (Expecting property name enclosed in double quotes, line 1).",
        ),
        (b"\xff\xfe{}", "The card is not UTF-8 text (byte 0)."),
        (as_json([1, 2]), "The card is not a JSON object."),
        (b"[" * 200_000 + b"]" * 200_000, "The card's JSON is nested too deeply."),
        (
            as_json({"spec": "chara_card_v9", "data": {}}),
            "Not a character card V2 or V3 (its spec is 'chara_card_v9').",
        ),
        (
            as_json({"spec": "chara_card_v2", "data": "x"}),
            "The card's `data` must be a JSON object (spec chara_card_v2).",
        ),
        (as_json(with_data(SERAPHINA_V2, description=5)), "The card's data.description must be a string."),
        (as_json(with_data(SERAPHINA_V2, tags=["ok", 3])), "The card's data.tags[1] must be a string."),
        (as_json(with_data(SERAPHINA_V2, tags="a,b")), "The card's data.tags must be a list."),
        (
            as_json(with_data(SERAPHINA_V2, extensions=[1])),
            "The card's data.extensions must be a JSON object.",
        ),
        (
            as_json(with_data(SERAPHINA_V2, description="x" * (MAX_CARD_TEXT + 1))),
            f"The card's data.description is over {MAX_CARD_TEXT:,} characters.",
        ),
        (
            as_json(with_data(SERAPHINA_V2, alternate_greetings=["hi"] * (MAX_CARD_LIST + 1))),
            f"The card's data.alternate_greetings has over {MAX_CARD_LIST} items.",
        ),
        (
            as_json(with_data(SERAPHINA_V2, extensions=_nested(MAX_CARD_DEPTH + 2))),
            f"The card's data.extensions is nested over {MAX_CARD_DEPTH} levels deep.",
        ),
        (as_json(with_data(SERAPHINA_V2, name="  ")), "The card has no name."),
        (as_json({"name": "Old", "tags": [1]}), "The card's tags[0] must be a string."),
        (b" " * (MAX_CARD_FILE_BYTES + 1), f"The card file is over {MAX_CARD_FILE_BYTES // 2**20} MiB."),
        (b" " * (MAX_CARD_JSON_BYTES + 1), f"The card is over {MAX_CARD_JSON_BYTES // 2**20} MiB of JSON."),
        (_cut(GOOD_PNG, len(GOOD_PNG) - 2), "The PNG is truncated (its 'IEND' chunk is cut off)."),
        (_cut(GOOD_PNG, 60), "The PNG is truncated (its 'IDAT' chunk is cut off)."),
        (_cut(GOOD_PNG, len(GOOD_PNG) - 12), "The PNG is truncated (it ends before its IEND chunk)."),
        (_bad_crc(GOOD_PNG), "The PNG is corrupt (its 'IHDR' chunk fails its CRC)."),
        (png(), "The PNG has no character card in it (no 'chara' or 'ccv3' text chunk)."),
        (png(text_chunk("chara", b"%%% not base64 %%%")), "The PNG's card chunk is not base64 text."),
        (
            png(chunk(b"zTXt", b"chara\x00\x00" + b"not zlib")),
            "The PNG's zTXt 'chara' chunk is not valid compressed data.",
        ),
        (
            png(chunk(b"zTXt", b"chara\x00\x07" + b"x")),
            "The PNG's zTXt 'chara' chunk uses an unknown compression method.",
        ),
        (
            png(bomb_chunk("chara", b"zTXt")),
            "The PNG's zTXt 'chara' chunk inflates to over 5 MiB; a card is never that large.",
        ),
        (
            png(bomb_chunk("ccv3", b"iTXt")),
            "The PNG's iTXt 'ccv3' chunk inflates to over 5 MiB; a card is never that large.",
        ),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else None,
)
def test_broken_and_hostile_cards_are_one_line(data: bytes, message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_card(data)
    assert str(caught.value) == message


def test_card_files_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="No such file"):
        read_card_file(tmp_path / "missing.png")
    with pytest.raises(InvalidInputError, match="is a directory, not a card file"):
        read_card_file(tmp_path)
    big = tmp_path / "big.png"
    big.write_bytes(b"\0" * (MAX_CARD_FILE_BYTES + 1))
    with pytest.raises(InvalidInputError, match="is over 8 MiB; not a card"):
        read_card_file(big)
    card = tmp_path / "card.png"
    card.write_bytes(card_png(SERAPHINA_V2))
    assert read_card_file(card).fields.name == "Seraphina"


def test_a_bomb_in_a_chunk_that_is_no_card_is_never_inflated() -> None:
    """Only the card's chunk is read: a zTXt comment bomb beside it costs nothing."""
    card = parse_card(
        png(bomb_chunk("Comment", b"zTXt", megabytes=256), text_chunk("chara", encoded(SERAPHINA_V2)))
    )
    assert card.fields.name == "Seraphina"


def test_a_card_followed_by_many_compressed_card_chunks_inflates_only_the_card_used() -> None:
    """The outside probe's bomb (issue 20, item 9): a real `chara` chunk, then hundreds of compressed
    `chara` chunks of 5 MB each. Only the first chunk of a keyword is read, so none of the others is
    inflated: a broken one among them, which would be refused if it were, proves it."""
    five_mb = text_chunk("chara", b"A" * 5 * 2**20, b"zTXt")
    broken = chunk(b"zTXt", b"chara\x00\x00" + b"not zlib")
    data = png(text_chunk("chara", encoded(SERAPHINA_V2)), *[five_mb] * 200, broken)
    assert len(data) < MAX_CARD_FILE_BYTES
    assert parse_card(data).fields.name == "Seraphina"


def test_the_walk_ends_at_the_v3_card_used() -> None:
    """Nothing after the `ccv3` chunk is read: not a bomb, not a damaged chunk."""
    card_v3 = v3(SERAPHINA_V2, nickname="Sera")
    after = [bomb_chunk("ccv3", b"zTXt"), _bad_crc(png())[len(SIGNATURE) :]]
    data = png(text_chunk("chara", encoded(SERAPHINA_V2)), text_chunk("ccv3", encoded(card_v3)), *after)
    assert parse_card(data).fields.nickname == "Sera"


def test_a_png_of_too_many_chunks_is_refused_in_one_line() -> None:
    data = png(*[chunk(b"teXt", b"")] * MAX_PNG_CHUNKS, text_chunk("chara", encoded(SERAPHINA_V2)))
    with pytest.raises(InvalidInputError) as caught:
        parse_card(data)
    assert str(caught.value) == "The PNG has over 20,000 chunks; a card's picture never has."


def test_macros() -> None:
    text = "{{user}} meets {{char}}. <BOT> waves at <USER>.\n{{user}}: hi"
    # The user stays a macro in the prompt every user shares; each chat fills it (fill_user).
    assert fill_macros(text, "Sera") == "{{user}} meets Sera. Sera waves at {{user}}.\n{{user}}: hi"
    assert fill_user(fill_macros(text, "Sera"), "Ann") == "Ann meets Sera. Sera waves at Ann.\nAnn: hi"
    assert fill_chat_macros(
        "{{user}} meets {{char}} at <char>'s door.{{original}}", char="Sera", user="Ann"
    ) == ("Ann meets Sera at Sera's door.")


def test_original_is_the_prompt_personae_would_have_used() -> None:
    """`{{original}}` is what the card's system prompt replaces (the V2 spec): "You are NAME.", not a
    default whose "kind" contradicts a sarcastic card."""
    fields = CardFields.model_validate(
        {"name": "Vex", "system_prompt": "{{original}} Answer in riddles.", "personality": "sarcastic"}
    )
    assert (
        compose_prompt(fields, "Vex").text
        == "You are Vex. Answer in riddles.\n\nVex's personality: sarcastic"
    )


def test_a_v3_nickname_is_what_char_means() -> None:
    fields = parse_card(as_json(v3(SERAPHINA_V2, nickname="Sera"))).fields
    text = compose_prompt(fields, "Seraphina").text
    assert text.startswith("Write Sera's next reply") and "Sera is a guardian" in text
    assert "Seraphina's personality:" in text and "Sera: I am Seraphina, keeper of this glade." in text


def test_a_v3_card_with_v1_fields_on_top_and_empty_data_imports() -> None:
    """Seen in the wild: V1-style top-level fields with `"spec": "chara_card_v3", "data": {}`."""
    top = {k: SERAPHINA_V2["data"][k] for k in ("name", "description", "personality", "first_mes")}
    card = parse_card(as_json({**top, "spec": "chara_card_v3", "spec_version": "3.0", "data": {}}))
    assert (card.spec, card.fields.name, card.fields.first_mes) == (
        "chara_card_v3",
        "Seraphina",
        top["first_mes"],
    )
    partial = parse_card(
        as_json({**top, "spec": "chara_card_v2", "data": {"name": "", "scenario": "A glade."}})
    )
    assert (partial.fields.name, partial.fields.scenario) == ("Seraphina", "A glade.")


def test_examples_that_do_not_fit_are_left_out_and_counted() -> None:
    long_example = "<START>\n{{char}}: " + "la " * 1500
    fields = CardFields.model_validate(
        {"name": "Sera", "description": "A singer.", "mes_example": long_example * 3}
    )
    prompt = compose_prompt(fields, "Sera")
    assert len(prompt.text) <= MAX_PROMPT_LENGTH
    assert (prompt.examples, prompt.examples_kept, prompt.examples_left_out) == (3, 1, 2)
    assert prompt.text.startswith("You are Sera.\n\nA singer.\n\nExamples of how Sera talks")


def test_a_card_too_long_for_a_prompt_is_refused_with_its_size() -> None:
    fields = CardFields.model_validate({"name": "Sera", "description": "d" * MAX_PROMPT_LENGTH})
    with pytest.raises(
        InvalidInputError, match=r"come to 6,015 characters; a personality's prompt holds at most 6,000"
    ):
        compose_prompt(fields, "Sera")


def test_a_card_of_only_a_system_prompt_is_that_prompt() -> None:
    assert (
        compose_prompt(CardFields.model_validate({"name": "X", "system_prompt": "Be X."}), "X").text
        == "Be X."
    )
    assert (
        compose_prompt(CardFields.model_validate({"name": "X"}), "X").text
        == "You are X. Stay in character, be concise and kind."
    )
