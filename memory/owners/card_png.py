"""Character cards in PNGs: find a card's text in one (its `ccv3` or `chara` text chunk), and write
cards into one as SillyTavern does.

The chunks are walked with the standard library and no pixel is decoded. A card file is input from
strangers, so every length is checked against what is left of the file and every chunk's CRC is
checked. Only the one chunk whose card is used is ever inflated, up to MAX_CARD_CHUNK_TEXT: a zip bomb
stops there, and a file of many compressed card chunks (only the first of each keyword counts) costs
what one does. The walk ends at the first `ccv3` chunk: that card is used, whatever follows.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from memory.errors import InvalidInputError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The card's JSON once decoded; a card is text, and even one with a large lorebook stays well under.
MAX_CARD_JSON_BYTES = 4 * 1024 * 1024
# base64 makes 4 characters of 3 bytes; the chunk's text may carry up to this many.
MAX_CARD_CHUNK_TEXT = MAX_CARD_JSON_BYTES * 4 // 3 + 4
# A real picture splits its pixels into a few thousand chunks at most; walking more only costs time.
MAX_PNG_CHUNKS = 20_000
# Which keyword wins when a PNG carries both: V3 writers keep a V2 `chara` beside it for old readers.
CARD_KEYWORDS = ("ccv3", "chara")
_TEXT_CHUNKS = (b"tEXt", b"zTXt", b"iTXt")
# The picture of a card exported without one of its own: 64x64 pixels of a quiet grey.
_PLAIN_SIDE = 64
_PLAIN_RGB = bytes([0x8A, 0x8F, 0x99])


def is_png(data: bytes) -> bool:
    return data.startswith(PNG_SIGNATURE)


@dataclass(frozen=True, slots=True)
class _Chunk:
    kind: bytes
    body: bytes

    @property
    def name(self) -> str:
        return self.kind.decode("latin-1")

    @property
    def card_keyword(self) -> str | None:
        """`ccv3` or `chara` for a text chunk holding a card, else None."""
        if self.kind not in _TEXT_CHUNKS:
            return None
        keyword, sep, _ = self.body.partition(b"\x00")
        name = keyword.decode("latin-1").lower()
        return name if sep and name in CARD_KEYWORDS else None

    def encoded(self) -> bytes:
        return (
            struct.pack(">I", len(self.body))
            + self.kind
            + self.body
            + struct.pack(">I", zlib.crc32(self.kind + self.body))
        )


def _walk(data: bytes, *, stop_at_ccv3: bool) -> Iterator[_Chunk]:
    """The file's chunks, lengths and CRCs checked, up to IEND (or the first `ccv3`, with stop_at_ccv3)."""
    if not is_png(data):
        raise InvalidInputError("Not a PNG file.")
    position = len(PNG_SIGNATURE)
    for _ in range(MAX_PNG_CHUNKS):
        if position + 8 > len(data):
            raise InvalidInputError("The PNG is truncated (it ends before its IEND chunk).")
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        end = position + 8 + length
        if end + 4 > len(data):
            raise InvalidInputError(
                f"The PNG is truncated (its {kind.decode('latin-1')!r} chunk is cut off)."
            )
        chunk = _Chunk(kind, data[position + 8 : end])
        (crc,) = struct.unpack(">I", data[end : end + 4])
        if zlib.crc32(kind + chunk.body) != crc:
            raise InvalidInputError(f"The PNG is corrupt (its {chunk.name!r} chunk fails its CRC).")
        yield chunk
        if kind == b"IEND" or (stop_at_ccv3 and chunk.card_keyword == "ccv3"):
            return
        position = end + 4
    raise InvalidInputError(f"The PNG has over {MAX_PNG_CHUNKS:,} chunks; a card's picture never has.")


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


def _chunk_text(chunk: _Chunk, keyword: str) -> bytes:
    """The text a card chunk holds, inflated when it is compressed."""
    rest = chunk.body.partition(b"\x00")[2]
    described = f"{chunk.name} {keyword!r}"
    if chunk.kind == b"tEXt":
        return rest
    if chunk.kind == b"zTXt":
        if rest[:1] != b"\x00":
            raise InvalidInputError(f"The PNG's {described} chunk uses an unknown compression method.")
        return _inflate(rest[1:], described)
    # iTXt: compression flag, method, language tag NUL, translated keyword NUL, then the UTF-8 text.
    if len(rest) < 2:
        raise InvalidInputError(f"The PNG's {described} chunk is cut off.")
    compressed, method = rest[0], rest[1]
    parts = rest[2:].split(b"\x00", 2)
    if len(parts) != 3:
        raise InvalidInputError(f"The PNG's {described} chunk is malformed.")
    if not compressed:
        return parts[2]
    if method != 0:
        raise InvalidInputError(f"The PNG's {described} chunk uses an unknown compression method.")
    return _inflate(parts[2], described)


def card_text_from_png(data: bytes) -> str:
    """The text of the PNG's card chunk (`ccv3` preferred over `chara`), still base64 as written."""
    found: dict[str, _Chunk] = {}
    for chunk in _walk(data, stop_at_ccv3=True):
        keyword = chunk.card_keyword
        if keyword is not None:
            found.setdefault(keyword, chunk)  # a later chunk of the same keyword is never read
    for keyword in CARD_KEYWORDS:
        if keyword in found:
            text = _chunk_text(found[keyword], keyword)
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


def plain_picture() -> bytes:
    """A small plain PNG, the picture of a card whose personality has none to give."""
    header = struct.pack(">IIBBBBB", _PLAIN_SIDE, _PLAIN_SIDE, 8, 2, 0, 0, 0)
    rows = (b"\x00" + _PLAIN_RGB * _PLAIN_SIDE) * _PLAIN_SIDE
    chunks = [_Chunk(b"IHDR", header), _Chunk(b"IDAT", zlib.compress(rows, 9)), _Chunk(b"IEND", b"")]
    return PNG_SIGNATURE + b"".join(chunk.encoded() for chunk in chunks)


def png_with_cards(picture: bytes, cards: Sequence[tuple[str, str]]) -> bytes:
    """The picture with these (keyword, base64 text) cards as tEXt chunks before its IEND, as
    SillyTavern writes them; the card chunks it had are left out, so the file holds only these."""
    kept = [chunk for chunk in _walk(picture, stop_at_ccv3=False) if chunk.card_keyword is None]
    written = [
        _Chunk(b"tEXt", keyword.encode("latin-1") + b"\x00" + text.encode("ascii")) for keyword, text in cards
    ]
    return PNG_SIGNATURE + b"".join(chunk.encoded() for chunk in [*kept[:-1], *written, kept[-1]])
