"""A personality's own picture: the PNG its character card came in, kept so `export` gives it back.

A table of its own, not a column of `personalities`: a picture is up to megabytes, and every reply
loads the personality row; the picture is read only by an export.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, LargeBinary
from sqlalchemy.orm import Mapped, mapped_column

from models.base import Base
from models.columns import UpdatedAt


class PersonalityPicture(Base):
    __tablename__ = "personality_pictures"

    # One picture a personality; deleting the personality deletes its picture.
    personality_id: Mapped[int] = mapped_column(
        ForeignKey("personalities.id", ondelete="CASCADE"), primary_key=True
    )
    png: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[UpdatedAt]
