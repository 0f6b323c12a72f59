"""Column kinds several tables share, each declared once (SQLAlchemy's Annotated idiom).

A column typed `Mapped[ExternalId]` is `mapped_column(String(64))`, `Mapped[ExternalId | None]` its
nullable form, and a `mapped_column(index=True)` on the right adds to it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, Integer, String, func, text
from sqlalchemy.orm import mapped_column

# External ids (Discord snowflakes, imported transcript ids) are strings: imports may use any id.
ExternalId = Annotated[str, mapped_column(String(64))]
IntId = Annotated[int, mapped_column(Integer, primary_key=True)]
BigId = Annotated[int, mapped_column(BigInteger, primary_key=True)]
PersonalityId = Annotated[int, mapped_column(ForeignKey("personalities.id", ondelete="CASCADE"))]
ConversationId = Annotated[int, mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))]
FalseByDefault = Annotated[bool, mapped_column(Boolean, server_default=text("false"))]
Timestamp = Annotated[datetime, mapped_column(DateTime(timezone=True))]
CreatedAt = Annotated[datetime, mapped_column(DateTime(timezone=True), server_default=func.now())]
UpdatedAt = Annotated[
    datetime, mapped_column(DateTime(timezone=True), server_default=func.now(), onupdate=func.now())
]
