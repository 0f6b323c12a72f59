"""Find a character card in a PNG: the base64 text of its `ccv3` or `chara` tEXt, zTXt or iTXt chunk.

The chunks are walked with the standard library and no pixel is decoded: a card file is input from
strangers, so every length is checked against what is left of the file, every chunk's CRC is checked,
and a compressed chunk is inflated only up to MAX_CARD_JSON_BYTES (a zip bomb stops there).
"""

from __future__ import annotations

import struct
import zlib

from memory.errors import InvalidInputError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The card's JSON once decoded; a card is text, and even one with a large lorebook stays well under.
MAX_CARD_JSON_BYTES = 4 * 1024 * 1024
# base64 makes 4 characters of 3 bytes; the chunk's text may carry up to this many.
MAX_CARD_CHUNK_TEXT = MAX_CARD_JSON_BYTES * 4 // 3 + 4
# Which keyword wins when a PNG carries both: V3 writers keep a V2 `chara` beside it for old readers.
CARD_KEYWORDS = ("ccv3", "chara")
_TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")


def is_png(data: bytes) -> bool:
    return data.startswith(PNG_SIGNATURE)


def _inflate(compressed: bytes, chunk: str) -> bytes:
    """Inflate a chunk's zlib stream, refusing one that would grow past MAX_CARD_CHUNK_TEXT."""
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(compressed, MAX_CARD_CHUNK_TEXT)
    except zlib.error:
        raise InvalidInputError(f"The PNG's {chunk} chunk is not valid compressed data.") from None
    if inflater.unconsumed_tail:
        raise InvalidInputError(
            f"The PNG's {chunk} chunk inflates to over {MAX_CARD_CHUNK_TEXT // 2**20} MiB; "
            "a card is never that large."
        )
    if not inflater.eof:
        raise InvalidInputError(f"The PNG's {chunk} chunk is cut off (its compressed data ends early).")
    return text


def _card_text(kind: bytes, body: bytes) -> tuple[str, bytes] | None:
    """(keyword, text bytes) of a text chunk holding a card; None for any other text chunk."""
    keyword_bytes, sep, rest = body.partition(b"\x00")
    keyword = keyword_bytes.decode("latin-1").lower()
    if not sep or keyword not in CARD_KEYWORDS:
        return None
    chunk = f"{kind.decode()} {keyword!r}"
    if kind == b"tEXt":
        return keyword, rest
    if kind == b"zTXt":
        if rest[:1] != b"\x00":
            raise InvalidInputError(f"The PNG's {chunk} chunk uses an unknown compression method.")
        return keyword, _inflate(rest[1:], chunk)
    # iTXt: compression flag, method, language tag NUL, translated keyword NUL, then the UTF-8 text.
    if len(rest) < 2:
        raise InvalidInputError(f"The PNG's {chunk} chunk is cut off.")
    compressed, method = rest[0], rest[1]
    parts = rest[2:].split(b"\x00", 2)
    if len(parts) != 3:
        raise InvalidInputError(f"The PNG's {chunk} chunk is malformed.")
    text = parts[2]
    if compressed:
        if method != 0:
            raise InvalidInputError(f"The PNG's {chunk} chunk uses an unknown compression method.")
        text = _inflate(text, chunk)
    return keyword, text


def card_text_from_png(data: bytes) -> str:
    """The text of the PNG's card chunk (`ccv3` preferred over `chara`), still base64 as written."""
    if not is_png(data):
        raise InvalidInputError("Not a PNG file.")
    found: dict[str, bytes] = {}
    position = len(PNG_SIGNATURE)
    while True:
        if position + 8 > len(data):
            raise InvalidInputError("The PNG is truncated (it ends before its IEND chunk).")
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        end = position + 8 + length
        if end + 4 > len(data):
            raise InvalidInputError(
                f"The PNG is truncated (its {kind.decode('latin-1')!r} chunk is cut off)."
            )
        body = data[position + 8 : end]
        (crc,) = struct.unpack(">I", data[end : end + 4])
        if zlib.crc32(kind + body) != crc:
            raise InvalidInputError(
                f"The PNG is corrupt (its {kind.decode('latin-1')!r} chunk fails its CRC)."
            )
        if kind in _TEXT_CHUNKS:
            card = _card_text(kind, body)
            if card is not None:
                found.setdefault(card[0], card[1])
        if kind == b"IEND":
            break
        position = end + 4
    for keyword in CARD_KEYWORDS:
        if keyword in found:
            text = found[keyword]
            if len(text) > MAX_CARD_CHUNK_TEXT:
                raise InvalidInputError(
                    f"The PNG's {keyword!r} chunk is over {MAX_CARD_CHUNK_TEXT // 2**20} MiB; "
                    "a card is never that large."
                )
            try:
                return text.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInputError(f"The PNG's {keyword!r} chunk is not text.") from None
    raise InvalidInputError("The PNG has no character card in it (no 'chara' or 'ccv3' text chunk).")
