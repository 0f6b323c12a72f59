"""A character card's fields (V1, V2 and V3) and the bounds every one of them is read within.

A card is input from strangers: every text field is bounded (MAX_CARD_TEXT), every list
(MAX_CARD_LIST) and the nesting of the free-form parts (MAX_CARD_DEPTH); text PostgreSQL cannot store
is made storable. Reading a file into these fields is cards.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from memory.conversations import storable_text
from memory.owners.card_png import MAX_CARD_CHUNK_TEXT

MAX_CARD_FILE_BYTES = 8 * 1024 * 1024
# What `export_png` writes for the largest card: two base64 copies of it (chara, ccv3) and the picture.
MAX_CARD_PNG_BYTES = MAX_CARD_FILE_BYTES + 2 * MAX_CARD_CHUNK_TEXT
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


def _timestamp(value: Any) -> int | float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("card_type", "must be a number (seconds since 1970)")
    return value


Text = Annotated[str, BeforeValidator(_text(MAX_CARD_TEXT))]
ShortText = Annotated[str, BeforeValidator(_text(MAX_CARD_SHORT_TEXT))]
JsonObject = Annotated[dict[str, Any] | None, BeforeValidator(_json_object)]
Timestamp = Annotated[int | float | None, BeforeValidator(_timestamp)]
# The fields every V2 card has (the spec makes them required): an export always writes them.
V2_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "alternate_greetings",
    "tags",
    "creator",
    "character_version",
    "extensions",
)


class CardFields(BaseModel):
    """A card's `data` (V1: the card itself). Fields this version of the specs does not name (a later
    version's) are kept as they came, as the V3 specification allows, so they export back."""

    model_config = ConfigDict(frozen=True, extra="allow")
    __pydantic_extra__: dict[str, Annotated[Any, BeforeValidator(_storable_json)]]

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
    assets: Annotated[list[JsonObject], BeforeValidator(_list)] = []
    source: Annotated[list[Text], BeforeValidator(_list)] = []
    creator_notes_multilingual: JsonObject = None
    creation_date: Timestamp = None
    modification_date: Timestamp = None

    @model_validator(mode="before")
    @classmethod
    def _storable_keys(cls, data: Any) -> Any:
        """Field names PostgreSQL's jsonb takes (a key of a later version's field may hold anything)."""
        return {storable_text(str(k)): v for k, v in data.items()} if isinstance(data, dict) else data

    def stored(self, spec: str) -> dict[str, Any]:
        """What `personalities.card` keeps: every field the card came with but the name (a column)."""
        return {"spec": spec, **self.model_dump(exclude={"name"}, exclude_unset=True)}
