"""The bot's settings: the domain's, plus Discord's (token, admins, creators, flood control, reaction).

The domain receives admin and creator ids as constructor arguments from the composition root
(bot/runtime.py), so it never reads Discord's settings itself.
"""

from __future__ import annotations

from pydantic import Field, SecretStr

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


def load_bot_settings(**overrides: object) -> BotSettings:
    """The bot's settings from the environment, `overrides` taking precedence; errors in one line."""
    return build_settings(BotSettings, **overrides)
