"""Character cards (V1, V2 and V3, as JSON or PNG): read one into a new personality, say what of it is
used, write it back out.

A card is input from strangers. The file is bounded (MAX_CARD_FILE_BYTES), and every field within
it (card_fields.py); wrong types and broken files are refused with one line naming the problem,
before anything is stored. The personality's system prompt is composed from the card
(card_prompt.py); every field the card came with is kept in `personalities.card`, so `export` writes
the card back as it came, a V3 card as V3 (JSON, or a PNG with `ccv3` and `chara` chunks, as
SillyTavern writes them). What a chat takes from the card besides the prompt (greetings, lorebook,
post-history instructions, depth prompt) is read from there: card_prompt.card_chat, lore.py.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from memory.errors import InvalidInputError

# The bounds and specs the front doors name are theirs to import from here, beside the reader.
from memory.owners.card_fields import MAX_CARD_FILE_BYTES as MAX_CARD_FILE_BYTES
from memory.owners.card_fields import MAX_CARD_LIST, MAX_CARD_PNG_BYTES, V1, V2, V2_FIELDS, CardFields
from memory.owners.card_fields import V3 as V3
from memory.owners.card_png import (
    MAX_CARD_JSON_BYTES,
    card_text_from_png,
    is_png,
    plain_picture,
    png_with_cards,
)
from memory.owners.card_prompt import ComposedPrompt, compose_prompt
from memory.owners.card_report import CardReport, card_report
from memory.owners.lore_cap import cap_lorebook
from memory.owners.personality_fields import LookAlikeNameError, slugify, validate_avatar_url
from memory.types import MemoryMode

if TYPE_CHECKING:
    from memory.owners.personalities import PersonalityService
    from models import Personality


@dataclass(frozen=True)
class ParsedCard:
    spec: str
    fields: CardFields
    # An https image URL the card names (SillyTavern's top-level `avatar`, a V3 icon asset).
    avatar_url: str | None
    # The PNG the card came in, if it came in one: the character's picture.
    image: bytes | None
    lore_dropped: int = 0  # lorebook entries past MAX_ENTRIES, left out (memory.owners.lore_cap)

    @property
    def version(self) -> str:
        """ "V1", "V2" or "V3", as users name the specs."""
        return {V1: "V1", V2: "V2", V3: "V3"}[self.spec]


@dataclass(frozen=True)
class CardImport:
    personality: Personality
    prompt: ComposedPrompt
    report: CardReport


def _validation_error(error: ValidationError, prefix: str) -> InvalidInputError:
    problem = error.errors()[0]
    path = prefix
    for part in problem["loc"]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    message = problem["msg"] if problem["type"].startswith("card_") else "is not valid"
    return InvalidInputError(f"The card's {path} {message}.")


def _decode_chunk_text(text: str) -> bytes:
    """A PNG card chunk's text: base64 as the spec says, or (from a few old writers) the JSON itself."""
    if text.lstrip().startswith("{"):
        return text.encode()
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInputError("The PNG's card chunk is not base64 text.") from None


def _load_json(raw: bytes) -> dict[str, Any]:
    # The JSON limit is on the card written compactly: an export is indented (issue 33).
    if len(raw) > MAX_CARD_JSON_BYTES and len(_compact(raw)) > MAX_CARD_JSON_BYTES:
        raise InvalidInputError(f"The card is over {MAX_CARD_JSON_BYTES // 2**20} MiB of JSON.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"The card is not UTF-8 text (byte {exc.start}).") from None
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"The card is not valid JSON ({exc.msg}, line {exc.lineno}).") from None
    except RecursionError:
        raise InvalidInputError("The card's JSON is nested too deeply.") from None
    if not isinstance(loaded, dict):
        raise InvalidInputError("The card is not a JSON object.")
    return loaded


def _avatar_url(card: dict[str, Any], data: dict[str, Any]) -> str | None:
    """The first https image URL the card names, or None (an invalid one is ignored, not fatal)."""
    candidates: list[Any] = [card.get("avatar")]
    assets = data.get("assets")
    if isinstance(assets, list):
        icons = [a for a in assets[:MAX_CARD_LIST] if isinstance(a, dict) and a.get("type") == "icon"]
        icons.sort(key=lambda a: a.get("name") != "main")
        candidates += [a.get("uri") for a in icons]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.startswith("https://"):
            try:
                return validate_avatar_url(candidate)
            except InvalidInputError:
                continue
    return None


def _compact(raw: bytes) -> bytes:
    """The JSON without the whitespace between its tokens (raw unchanged when it is no JSON)."""
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()
    except (ValueError, RecursionError):
        return raw


def _card_body(card: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """(spec, the card's fields, where they are) of a card's JSON object."""
    spec = card.get("spec")
    if spec in (V2, V3):
        body = card.get("data")
        if not isinstance(body, dict):
            raise InvalidInputError(f"The card's `data` must be a JSON object (spec {spec}).")
        # Some writers leave V1's top-level fields beside an empty or partial `data`: what `data`
        # lacks (or has empty) comes from them, as SillyTavern reads such a card.
        fallback = {k: card[k] for k in CardFields.model_fields if k in card and _empty(body.get(k))}
        return str(spec), {**body, **fallback}, "data"
    if spec is None and "name" in card:
        return V1, card, ""
    shown = repr(spec)[:40] if spec is not None else "none"
    raise InvalidInputError(f"Not a character card V2 or V3 (its spec is {shown}).")


def _empty(value: Any) -> bool:
    return value is None or value in ("", [], {})


def parse_card(data: bytes) -> ParsedCard:
    """Read a card from a JSON or PNG file's bytes; InvalidInputError names what is wrong with it."""
    image = data if is_png(data) else None
    if len(data) > (limit := MAX_CARD_PNG_BYTES if image else MAX_CARD_FILE_BYTES):
        raise InvalidInputError(f"The card file is over {limit // 2**20} MiB.")
    card = _load_json(_decode_chunk_text(card_text_from_png(data)) if image else data)
    spec, body, prefix = _card_body(card)
    body, dropped = cap_lorebook(body)
    try:
        fields = CardFields.model_validate(body)
    except ValidationError as exc:
        raise _validation_error(exc, prefix) from None
    if not fields.name.strip():
        raise InvalidInputError("The card has no name.")
    return ParsedCard(spec, fields, _avatar_url(card, body), image, lore_dropped=dropped)


def read_card_file(path: Path) -> ParsedCard:
    """Read a card from a file, refusing one over MAX_CARD_FILE_BYTES unread."""
    try:
        size = path.stat().st_size
        if size > MAX_CARD_FILE_BYTES:  # only a PNG may be larger (MAX_CARD_PNG_BYTES)
            with path.open("rb") as head:
                limit = MAX_CARD_PNG_BYTES if is_png(head.read(16)) else MAX_CARD_FILE_BYTES
            if size > limit:
                raise InvalidInputError(f"{path} is over {limit // 2**20} MiB; not a card.")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InvalidInputError(f"No such file: {path}") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{path} is a directory, not a card file.") from None
    except OSError as exc:
        raise InvalidInputError(f"Cannot read {path}: {exc.strerror}.") from None
    return parse_card(data)


async def create_from_card(
    personalities: PersonalityService,
    card: ParsedCard,
    *,
    name: str | None = None,
    owner_id: str | None = None,
    by_operator: bool,
    avatar_url: str | None = None,
    memory_mode: MemoryMode | str = MemoryMode.VERBATIM,
    display_name: str | None = None,
) -> CardImport:
    """A new personality from the card, named `name` or after the card; a taken name is refused.

    The operator (the CLI) creates as `personality create` does; a user creates as /personality
    create does, within its rules (who may create, how many each owns). `display_name`: shown instead
    of the card's name (a second copy of a card cannot read like the first).
    """
    display = (display_name or card.fields.name).strip()
    slug = slugify(name if name is not None else display)
    if not slug:
        source = f"The name {name!r}" if name is not None else f"The card's name {display!r}"
        raise InvalidInputError(f"{source} has no letters or digits to make a name from; give another name.")
    prompt = compose_prompt(card.fields, display)
    stored = card.fields.stored(card.spec)
    try:
        if by_operator:
            personality, created = await personalities.create(
                slug,
                display_name=display,
                prompt=prompt.text,
                owner_id=owner_id,
                avatar_url=avatar_url,
                card=stored,
                memory_mode=memory_mode,
            )
            if not created:
                raise InvalidInputError(
                    f"A personality named {slug!r} already exists; import the card under another name with "
                    "--name NAME."
                )
        else:
            if owner_id is None:
                raise InvalidInputError("A user's import needs its owner.")
            personality = await personalities.create_owned(
                slug,
                owner_id=owner_id,
                display_name=display,
                prompt=prompt.text,
                avatar_url=avatar_url,
                card=stored,
            )
    except LookAlikeNameError as exc:
        if display_name is not None:
            raise
        # The card's own name is taken: the fix is a display name, which `name` alone does not change.
        raise LookAlikeNameError(
            f"{exc} Give this copy a display name of its own (`display_name:` on Discord, "
            "`--display-name` in the CLI)."
        ) from None
    report = card_report(card.fields, prompt, lore_dropped=card.lore_dropped)
    return CardImport(personality, prompt, report)


def export_card(personality: Personality) -> dict[str, Any]:
    """The personality as a character card that `import` reads back into the same personality: V3 if
    it came from a V3 card, else V2; every field the card came with is written back.

    The card's own fields are written as they came when the personality's prompt is still the one
    they compose; once the prompt was edited (or for a personality that never had a card), the prompt
    is the card's system prompt and the fields it was composed from are left out, being in it.
    """
    came = {k: v for k, v in (personality.card or {}).items() if k != "spec"}
    spec = V3 if (personality.card or {}).get("spec") == V3 else V2
    fields = CardFields.model_validate({**came, "name": personality.display_name})
    everything = fields.model_dump()
    written = [*V2_FIELDS, *came, *(["group_only_greetings"] if spec == V3 else [])]
    data = {k: everything[k] for k in dict.fromkeys(written) if everything.get(k) is not None}
    try:
        unchanged = compose_prompt(fields, personality.display_name).text == personality.system_prompt
    except InvalidInputError:
        unchanged = False
    if not unchanged:
        blank = dict.fromkeys(("description", "personality", "scenario", "mes_example"), "")
        data |= blank | {"system_prompt": personality.system_prompt}
    data["extensions"] = data.get("extensions") or {}
    card: dict[str, Any] = {"spec": spec, "spec_version": "3.0" if spec == V3 else "2.0", "data": data}
    if personality.avatar_url:
        card["avatar"] = personality.avatar_url  # where SillyTavern's JSON cards keep it
    return card


def _chunk_text(card: dict[str, Any]) -> str:
    text = json.dumps(card, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def export_png(personality: Personality, picture: bytes | None = None) -> bytes:
    """The card in a PNG as SillyTavern writes one: the V2 card in a `chara` chunk for older readers,
    the same card as V3 in a `ccv3` chunk, in `picture` (a plain one when None)."""
    card = export_card(personality)
    as_v2 = {**card, "spec": V2, "spec_version": "2.0"}
    as_v3 = {**card, "spec": V3, "spec_version": "3.0"}
    as_v3["data"] = {"group_only_greetings": [], **card["data"]}
    try:
        return png_with_cards(
            picture or plain_picture(), [("chara", _chunk_text(as_v2)), ("ccv3", _chunk_text(as_v3))]
        )
    except InvalidInputError as exc:
        raise InvalidInputError(f"The picture is not a PNG the card can go in: {exc}") from None
