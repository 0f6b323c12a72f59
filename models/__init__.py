"""SQLAlchemy models and the async engine/session factory. Imports nothing from memory/ or bot/."""

from models.base import Base
from models.entities import (
    ChannelBinding,
    Conversation,
    IncognitoSession,
    LLMConfig,
    Message,
    Persona,
    Personality,
    Summary,
    SystemPrompt,
    UserSettings,
)
from models.memories import ForgottenClaim, Memory, ReplyMemory
from models.pictures import PersonalityPicture

__all__ = [
    "Base",
    "ChannelBinding",
    "Conversation",
    "ForgottenClaim",
    "IncognitoSession",
    "LLMConfig",
    "Memory",
    "Message",
    "Persona",
    "Personality",
    "PersonalityPicture",
    "ReplyMemory",
    "Summary",
    "SystemPrompt",
    "UserSettings",
]
