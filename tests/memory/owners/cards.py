"""Character cards written by the tests: V2 and V3 JSON, and PNGs that carry them as card writers do.

The PNGs are real (a small RGB picture that decodes), built chunk by chunk so a test can also make the
broken ones: a cut-off file, a bad CRC, a zip bomb in a zTXt or iTXt chunk.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

SIGNATURE = b"\x89PNG\r\n\x1a\n"

SERAPHINA_V2: dict[str, Any] = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Seraphina",
        "description": "{{char}} is a guardian of the Eldoria forest who found {{user}} wounded.",
        "personality": "caring, protective, a little teasing",
        "scenario": "{{user}} wakes up in {{char}}'s glade.",
        "first_mes": "*Seraphina smiles* You're awake, {{user}}.",
        "mes_example": (
            "<START>\n{{user}}: Who are you?\n{{char}}: I am Seraphina, keeper of this glade.\n"
            "<START>\n{{user}}: Where am I?\n{{char}}: Safe, in Eldoria."
        ),
        "system_prompt": "Write {{char}}'s next reply in a gentle fantasy roleplay.",
        "creator_notes": "Best with a long context.",
        "post_history_instructions": "Stay gentle.",
        "alternate_greetings": ["*Seraphina hums* Rested, {{user}}?"],
        "tags": ["fantasy", "guardian"],
        "creator": "tester",
        "character_version": "1.2",
        "extensions": {"depth_prompt": {"depth": 4, "prompt": "Remember the forest."}},
    },
}


# What compose_prompt makes of SERAPHINA_V2.
SERAPHINA_PROMPT = (
    "Write Seraphina's next reply in a gentle fantasy roleplay.\n\n"
    "Seraphina is a guardian of the Eldoria forest who found {{user}} wounded.\n\n"
    "Seraphina's personality: caring, protective, a little teasing\n\n"
    "Scenario: {{user}} wakes up in Seraphina's glade.\n\n"
    "Examples of how Seraphina talks (their style only, not things that happened):\n\n"
    "{{user}}: Who are you?\nSeraphina: I am Seraphina, keeper of this glade.\n\n"
    "{{user}}: Where am I?\nSeraphina: Safe, in Eldoria."
)
# A lorebook as SillyTavern exports one in a card, written for these tests: a constant entry, keyed
# ones, a disabled one, one with secondary keys, one at a depth of the history.
ELDORIA_BOOK: dict[str, Any] = {
    "name": "Eldoria",
    "scan_depth": 2,
    "recursive_scanning": False,
    "extensions": {},
    "entries": [
        {
            "id": 0,
            "keys": ["eldoria"],
            "content": "Eldoria is a walled forest of silver oaks where {{char}} keeps watch.",
            "extensions": {"position": 0, "depth": 4},
            "enabled": True,
            "insertion_order": 100,
            "constant": True,
            "position": "before_char",
            "comment": "Eldoria",
        },
        {
            "id": 1,
            "keys": ["Shadowfang", "wolves"],
            "content": "The Shadowfang are grey wolves that fear moonlight.",
            "extensions": {"position": 1},
            "enabled": True,
            "insertion_order": 90,
            "position": "after_char",
            "comment": "Shadowfang",
        },
        {
            "id": 2,
            "keys": ["amulet"],
            "content": "The amulet of dawn glows near danger.",
            "extensions": {},
            "enabled": False,
            "insertion_order": 100,
            "comment": "Amulet (retired)",
        },
        {
            "id": 3,
            "keys": ["glade"],
            "secondary_keys": ["night", "dark"],
            "selective": True,
            "content": "At night the glade's lanterns light themselves.",
            "extensions": {"selectiveLogic": 0},
            "enabled": True,
            "insertion_order": 110,
            "comment": "Glade at night",
        },
        {
            "id": 4,
            "keys": ["river"],
            "content": "[The river Lethe washes away memories.]",
            "extensions": {"position": 4, "depth": 1, "role": 0, "group": "water"},
            "enabled": True,
            "insertion_order": 100,
            "comment": "River",
        },
    ],
}


def v3(card: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The V2 card as V3, its data changed by `changes` (assets, nickname, ...)."""
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": {**card["data"], **changes}}


def with_data(card: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**card, "data": {**card["data"], **changes}}


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def text_chunk(keyword: str, text: bytes, kind: bytes = b"tEXt") -> bytes:
    """A tEXt, zTXt or iTXt (compressed) chunk holding `text` under `keyword`."""
    key = keyword.encode("latin-1") + b"\x00"
    if kind == b"tEXt":
        return chunk(kind, key + text)
    if kind == b"zTXt":
        return chunk(kind, key + b"\x00" + zlib.compress(text))
    return chunk(kind, key + b"\x01\x00" + b"en\x00" + b"\x00" + zlib.compress(text))


def picture(width: int = 4, height: int = 3) -> list[bytes]:
    """The chunks of a small RGB picture: IHDR and IDAT."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes([200, 120, 40]) * width for _ in range(height))
    return [chunk(b"IHDR", header), chunk(b"IDAT", zlib.compress(rows))]


def png(*extra: bytes) -> bytes:
    """A PNG with these chunks after its picture, as SillyTavern writes a card (before IEND)."""
    return SIGNATURE + b"".join([*picture(), *extra, chunk(b"IEND", b"")])


def as_json(card: Any) -> bytes:
    return json.dumps(card).encode()


def encoded(card: dict[str, Any]) -> bytes:
    return base64.b64encode(json.dumps(card).encode())


def card_png(card: dict[str, Any], keyword: str = "chara", kind: bytes = b"tEXt") -> bytes:
    return png(text_chunk(keyword, encoded(card), kind))


def bomb_chunk(keyword: str, kind: bytes, megabytes: int = 64) -> bytes:
    """A compressed text chunk of a few KiB that inflates to `megabytes` MiB of zeros."""
    packer = zlib.compressobj(9)
    block = bytes(2**20)
    compressed = b"".join(packer.compress(block) for _ in range(megabytes)) + packer.flush()
    key = keyword.encode() + b"\x00"
    prefix = b"\x00" if kind == b"zTXt" else b"\x01\x00\x00\x00"
    return chunk(kind, key + prefix + compressed)


# SERAPHINA_V2 as a V3 card with every field V3 adds, and one of a later version.
SERAPHINA_V3_DATA: dict[str, Any] = {
    **SERAPHINA_V2["data"],
    "character_book": ELDORIA_BOOK,
    "nickname": "Sera",
    "group_only_greetings": ["*Seraphina bows to the party*"],
    "assets": [
        {"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"},
        {"type": "background", "uri": "https://img.example/glade.png", "name": "main", "ext": "png"},
        {
            "type": "emotion",
            "uri": "embeded://assets/emotion/images/happy.png",
            "name": "happy",
            "ext": "png",
        },
    ],
    "source": ["https://cards.example/seraphina"],
    "creation_date": 1700000000,
    "modification_date": 1700000500,
    "creator_notes_multilingual": {"en": "Best with a long context.", "fr": "Mieux avec un long contexte."},
    "x_future_field": {"kept": ["as", "it", "came"]},
}
SERAPHINA_V3: dict[str, Any] = {"spec": "chara_card_v3", "spec_version": "3.0", "data": SERAPHINA_V3_DATA}
