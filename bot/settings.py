"""The bot's settings: the domain's, plus Discord's (token, admins, creators, flood control, reaction,
how late a missed message is still answered, how often pending memories are caught up).

The domain receives admin and creator ids as constructor arguments from the composition root
(bot/runtime.py), so it never reads Discord's settings itself.
"""

from __future__ import annotations

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from memory.settings import Settings, build_settings


class BotSettings(Settings):
    """Settings of a deployment with its Discord front door. Fields map to upper-case variables."""

    discord_token: SecretStr | None = None
    # Discord user ids allowed to manage every personality and the LLM configs.
    admin_ids: list[str] = Field(default_factory=list)
    # Who may create personalities with /personality create; unset = anyone.
    personality_creator_ids: list[str] | None = None
    cooldown_messages: int = Field(default=5, ge=1)
    cooldown_seconds: float = Field(default=10.0, gt=0)
    remembered_reaction: str = "📝"
    # Messages sent while the bot was offline are read back when it connects and all remembered;
    # those addressed to a personality within these last minutes are answered too, older ones not.
    missed_reply_minutes: float = Field(default=10.0, ge=0)
    # Memories left to form (a crash, a failed pass) are formed at start-up, then every so many
    # seconds; 0 turns that timer off (`personae worker` processes form them instead).
    catch_up_seconds: float = Field(default=300.0, ge=0)
    # Sharding (Discord requires it past 2,500 guilds): unset, one process runs Discord's recommended
    # number of shards. SHARD_COUNT with SHARD_IDS (e.g. 0,1) gives this process those shards only.
    shard_count: int | None = Field(default=None, ge=1)
    shard_ids: list[int] | None = None

    @field_validator("shard_ids")
    @classmethod
    def _shards_within_count(cls, shard_ids: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if shard_ids is None:
            return None
        count = info.data.get("shard_count")
        if count is None:
            raise ValueError("needs SHARD_COUNT (the total number of shards) as well")
        if not shard_ids or any(not 0 <= i < count for i in shard_ids):
            raise ValueError(f"must be shard numbers from 0 to {count - 1} (SHARD_COUNT is {count})")
        return shard_ids


def load_bot_settings(**overrides: object) -> BotSettings:
    """The bot's settings from the environment, `overrides` taking precedence; errors in one line."""
    return build_settings(BotSettings, **overrides)
