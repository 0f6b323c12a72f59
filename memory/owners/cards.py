"""Character cards (V2 and V3, as JSON or PNG): read one into a new personality, write one back out.

A card is input from strangers. The file is bounded (MAX_CARD_FILE_BYTES), every text field
(MAX_CARD_TEXT), every list (MAX_CARD_LIST) and the nesting of the free-form parts (extensions,
lorebook); wrong types and broken files are refused with one line naming the problem, before anything
is stored. The personality's system prompt is composed from the card (card_prompt.py); the card's own
fields are kept in `personalities.card`, so `export` writes the card back as it came.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from memory.conversations import storable_text
from memory.errors import InvalidInputError
from memory.owners.card_png import MAX_CARD_JSON_BYTES, card_text_from_png, is_png
from memory.owners.card_prompt import ComposedPrompt, compose_prompt
from memory.owners.personality_fields import slugify, validate_avatar_url
from memory.types import MemoryMode

if TYPE_CHECKING:
    from memory.owners.personalities import PersonalityService
    from models import Personality

MAX_CARD_FILE_BYTES = 8 * 1024 * 1024
MAX_CARD_TEXT = 50_000
MAX_CARD_SHORT_TEXT = 200
MAX_CARD_LIST = 200
MAX_CARD_DEPTH = 24
V1, V2, V3 = "chara_card_v1", "chara_card_v2", "chara_card_v3"


def _text(limit: int) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise PydanticCustomError("card_type", "must be a string")
        if len(value) > limit:
            raise PydanticCustomError("card_size", f"is over {limit:,} characters")
        return storable_text(value)

    return check


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PydanticCustomError("card_type", "must be a list")
    if len(value) > MAX_CARD_LIST:
        raise PydanticCustomError("card_size", f"has over {MAX_CARD_LIST} items")
    return value


def _storable_json(value: Any, depth: int = 0) -> Any:
    """A JSON value PostgreSQL's jsonb takes (no NUL, no lone surrogate), at most MAX_CARD_DEPTH deep."""
    if depth > MAX_CARD_DEPTH:
        raise PydanticCustomError("card_depth", f"is nested over {MAX_CARD_DEPTH} levels deep")
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, list):
        return [_storable_json(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {storable_text(k): _storable_json(v, depth + 1) for k, v in value.items()}
    return value


def _json_object(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise PydanticCustomError("card_type", "must be a JSON object")
    return _storable_json(value)  # type: ignore[no-any-return]


Text = Annotated[str, BeforeValidator(_text(MAX_CARD_TEXT))]
ShortText = Annotated[str, BeforeValidator(_text(MAX_CARD_SHORT_TEXT))]
JsonObject = Annotated[dict[str, Any] | None, BeforeValidator(_json_object)]


class CardFields(BaseModel):
    """A card's `data` (V1: the card itself); fields of other specs or versions are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: ShortText = ""
    description: Text = ""
    personality: Text = ""
    scenario: Text = ""
    first_mes: Text = ""
    mes_example: Text = ""
    system_prompt: Text = ""
    creator_notes: Text = ""
    post_history_instructions: Text = ""
    alternate_greetings: Annotated[list[Text], BeforeValidator(_list)] = []
    tags: Annotated[list[ShortText], BeforeValidator(_list)] = []
    creator: ShortText = ""
    character_version: ShortText = ""
    # V3 only; a V2 export carries them when set (V2 readers ignore keys they do not know).
    nickname: ShortText = ""
    group_only_greetings: Annotated[list[Text], BeforeValidator(_list)] = []
    character_book: JsonObject = None
    extensions: JsonObject = None

    def stored(self, spec: str) -> dict[str, Any]:
        """What `personalities.card` keeps: every field set but the name (a column of its own)."""
        kept = self.model_dump(exclude={"name"})
        return {"spec": spec, **{k: v for k, v in kept.items() if v not in ("", [], {}, None)}}


@dataclass(frozen=True)
class ParsedCard:
    spec: str
    fields: CardFields
    # An https image URL the card names (SillyTavern's top-level `avatar`, a V3 icon asset).
    avatar_url: str | None
    # The PNG the card came in, if it came in one: the character's picture.
    image: bytes | None

    @property
    def version(self) -> str:
        """ "V1", "V2" or "V3", as users name the specs."""
        return {V1: "V1", V2: "V2", V3: "V3"}[self.spec]


@dataclass(frozen=True)
class CardImport:
    personality: Personality
    prompt: ComposedPrompt


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
    if len(raw) > MAX_CARD_JSON_BYTES:
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


def parse_card(data: bytes) -> ParsedCard:
    """Read a card from a JSON or PNG file's bytes; InvalidInputError names what is wrong with it."""
    if len(data) > MAX_CARD_FILE_BYTES:
        raise InvalidInputError(f"The card file is over {MAX_CARD_FILE_BYTES // 2**20} MiB.")
    image = data if is_png(data) else None
    card = _load_json(_decode_chunk_text(card_text_from_png(data)) if image else data)
    spec = card.get("spec")
    if spec in (V2, V3):
        body = card.get("data")
        if not isinstance(body, dict):
            raise InvalidInputError(f"The card's `data` must be a JSON object (spec {spec}).")
        prefix = "data"
    elif spec is None and "name" in card:
        spec, body, prefix = V1, card, ""
    else:
        shown = repr(spec)[:40] if spec is not None else "none"
        raise InvalidInputError(f"Not a character card V2 or V3 (its spec is {shown}).")
    try:
        fields = CardFields.model_validate(body)
    except ValidationError as exc:
        raise _validation_error(exc, prefix) from None
    if not fields.name.strip():
        raise InvalidInputError("The card has no name.")
    return ParsedCard(spec=str(spec), fields=fields, avatar_url=_avatar_url(card, body), image=image)


def read_card_file(path: Path) -> ParsedCard:
    """Read a card from a file, refusing one over MAX_CARD_FILE_BYTES unread."""
    try:
        size = path.stat().st_size
        if size > MAX_CARD_FILE_BYTES:
            raise InvalidInputError(f"{path} is over {MAX_CARD_FILE_BYTES // 2**20} MiB; not a card.")
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
    return CardImport(personality, prompt)


def export_card(personality: Personality) -> dict[str, Any]:
    """The personality as a Character Card V2 that `import` reads back into the same personality.

    The card's own fields are written as they came when the personality's prompt is still the one
    they compose; once the prompt was edited (or for a personality that never had a card), the prompt
    is the card's system prompt and the fields it was composed from are left out, being in it.
    """
    stored = {k: v for k, v in (personality.card or {}).items() if k != "spec"}
    fields = CardFields.model_validate({**stored, "name": personality.display_name})
    data = fields.model_dump()
    try:
        unchanged = compose_prompt(fields, personality.display_name).text == personality.system_prompt
    except InvalidInputError:
        unchanged = False
    if not unchanged:
        blank = dict.fromkeys(("description", "personality", "scenario", "mes_example"), "")
        data |= blank | {"system_prompt": personality.system_prompt}
    data["extensions"] = data["extensions"] or {}
    for optional in ("character_book", "nickname", "group_only_greetings"):
        if not data[optional]:
            del data[optional]
    card: dict[str, Any] = {"spec": V2, "spec_version": "2.0", "data": data}
    if personality.avatar_url:
        card["avatar"] = personality.avatar_url  # where SillyTavern's JSON cards keep it
    return card
