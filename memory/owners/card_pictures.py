"""A card's own picture, kept with its personality so that `export` gives the card back in it.

What is kept is the PNG the card came in without its card chunks (the card is written afresh at each
export), bounded as a card file is. Importing stores it (import_card, for the CLI and Discord alike);
a personality made without a card has none, and its PNG export uses the plain placeholder; deleting
the personality deletes its picture (ON DELETE CASCADE).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memory.errors import InvalidInputError
from memory.owners.card_png import png_with_cards
from memory.owners.cards import MAX_CARD_FILE_BYTES, CardImport, ParsedCard, create_from_card, export_png
from memory.types import MemoryMode
from models import PersonalityPicture

if TYPE_CHECKING:
    from memory.owners.personalities import PersonalityService
    from models import Personality

# As large as a card file may be; the card's text is left out, so a real card's picture is far under.
MAX_CARD_PICTURE_BYTES = MAX_CARD_FILE_BYTES


@dataclasses.dataclass(frozen=True)
class PictureImport(CardImport):
    picture_kept: bool = False  # the card came in a PNG, and its picture is kept for `export`


class CardPictures:
    """The pictures personalities' cards came with, one a personality."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def keep(self, personality_id: int, picture: bytes) -> None:
        """Keep the personality's picture, replacing the one it had."""
        statement = insert(PersonalityPicture).values(personality_id=personality_id, png=picture)
        statement = statement.on_conflict_do_update(
            index_elements=[PersonalityPicture.personality_id],
            set_={"png": picture, "updated_at": func.now()},
        )
        async with self._sessionmaker.begin() as session:
            await session.execute(statement)

    async def get(self, personality_id: int) -> bytes | None:
        """The personality's own picture, or None when it never had one."""
        async with self._sessionmaker() as session:
            return await session.scalar(
                select(PersonalityPicture.png).where(PersonalityPicture.personality_id == personality_id)
            )

    async def export_png(self, personality: Personality, picture: bytes | None = None) -> bytes:
        """The card as a PNG in `picture`, else in its own picture, else in the plain placeholder."""
        return export_png(personality, picture or await self.get(personality.id))


def _picture_alone(card_png: bytes) -> tuple[bytes | None, str | None]:
    """(the picture without its card chunks, or None and why it cannot be kept). The card's own read
    stopped at its card chunk: the rest of the file is checked here, a broken end costing only the
    picture."""
    try:
        picture = png_with_cards(card_png, [])
    except InvalidInputError:
        return None, "the file is broken past the card"  # what is wrong was the picture's own business
    if len(picture) > MAX_CARD_PICTURE_BYTES:
        return None, f"over {MAX_CARD_PICTURE_BYTES // 2**20} MiB"
    return picture, None


async def import_card(
    personalities: PersonalityService,
    pictures: CardPictures,
    card: ParsedCard,
    *,
    name: str | None = None,
    owner_id: str | None = None,
    by_operator: bool,
    avatar_url: str | None = None,
    memory_mode: MemoryMode | str = MemoryMode.VERBATIM,
    display_name: str | None = None,
) -> PictureImport:
    """create_from_card, and the picture a PNG card came in kept with the new personality; a picture
    over MAX_CARD_PICTURE_BYTES (or broken past the card) is not kept, and the report says so."""
    picture, problem = _picture_alone(card.image) if card.image is not None else (None, None)
    imported = await create_from_card(
        personalities,
        card,
        name=name,
        owner_id=owner_id,
        by_operator=by_operator,
        avatar_url=avatar_url,
        memory_mode=memory_mode,
        display_name=display_name,
    )
    if picture is None:
        not_kept = [*imported.report.not_kept, *([f"its picture ({problem})"] if problem else [])]
        report = dataclasses.replace(imported.report, not_kept=not_kept)
        return PictureImport(imported.personality, imported.prompt, report)
    try:
        await pictures.keep(imported.personality.id, picture)
    except BaseException:  # an import keeps all of the card or nothing
        await personalities.delete(imported.personality.name, actor=None if by_operator else owner_id)
        raise
    return PictureImport(imported.personality, imported.prompt, imported.report, picture_kept=True)
