"""Plain value types shared across the memory layer (no I/O, no third-party imports)."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

# Told how many more items (exchanges, memories) a long job has done.
ProgressCallback = Callable[[int], None]


class MemoryMode(enum.StrEnum):
    """How a personality's exchanges become long-term memories."""

    VERBATIM = "verbatim"
    SUMMARIZED = "summarized"
    HYBRID = "hybrid"


class PromptType(enum.StrEnum):
    """What a stored system prompt is for; the values the `system_prompts.prompt_type` check allows.

    Only SUMMARIZER is written by name; PERSONALITY is the column's server default (every personality
    prompt row holds it) and SYSTEM is allowed by the check, so both stay until a migration drops them.
    """

    PERSONALITY = "personality"
    SUMMARIZER = "summarizer"
    SYSTEM = "system"


class SummarizationPreference(enum.StrEnum):
    """A user's own override of the personality's memory mode."""

    DEFAULT = "default"
    ENABLED = "enabled"
    DISABLED = "disabled"


class MessageRole(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class MemoryState(enum.StrEnum):
    """How far a memory got: written to Postgres, searchable in the index, or deleted; set aside when
    its point could not be built or written (counted, retried by `personae reindex`)."""

    FORMED = "formed"
    INDEXED = "indexed"
    DELETED = "deleted"
    SET_ASIDE = "set_aside"


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A sparse keyword vector: parallel lists of term indices and weights."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True, slots=True)
class MemoryPayload:
    """What the vector index stores beside the vectors: only what filters need."""

    personality_id: int
    user_id: str
    guild_id: str | None
    channel_id: str | None
    is_dm: bool
    occurred_at: float  # seconds since the epoch, UTC


@dataclass(frozen=True, slots=True)
class IndexPoint:
    """One memory in the vector index; its id is the memory's id in Postgres."""

    id: uuid.UUID
    dense: list[float]
    sparse: SparseVector
    payload: MemoryPayload


@dataclass(frozen=True, slots=True)
class RecallFilter:
    """Who may see what: a user's memories of one personality, in one venue.

    guild_id None means the query comes from a DM: every venue of the user's memories is allowed.
    guild_id set means a guild channel: memories formed in that guild, plus DM memories only when
    allow_dm is true.
    """

    personality_id: int
    user_id: str
    guild_id: str | None = None
    allow_dm: bool = False


@dataclass(frozen=True, slots=True)
class ScoredId:
    id: uuid.UUID
    score: float


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Everything needed to call one LLM through litellm."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.3
    max_tokens: int = 512
    timeout: float = 60.0
    context_window: int | None = None
    # Where the key and the model come from (`SUMMARIZER_API_KEY`, an LLM config's name): what an
    # authentication or configuration error tells the user to set.
    key_setting: str | None = None
    model_setting: str | None = None

    @property
    def provider(self) -> str:
        """The litellm provider prefix (`openai` in `openai/gpt-4o-mini`), used to bound concurrency."""
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"
