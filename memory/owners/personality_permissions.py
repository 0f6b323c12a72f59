"""Who may change a personality or bind it to a channel: its owner, a bot admin, the operator.

Part of PersonalityService; kept apart so the rules read in one place.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory.errors import PermissionDeniedError
from models import Personality


class PersonalityPermissions:
    """The owner rules. An actor of None is the operator (the CLI), who may do anything."""

    def __init__(self, admin_ids: Iterable[str] = ()) -> None:
        self.admin_ids = frozenset(admin_ids)

    def is_admin(self, user_id: str | None) -> bool:
        return user_id is None or user_id in self.admin_ids

    def can_manage(self, personality: Personality, user_id: str | None) -> bool:
        return self.is_admin(user_id) or (
            personality.owner_id is not None and personality.owner_id == user_id
        )

    def require_manager(
        self, personality: Personality, user_id: str | None, doing: str = "change it"
    ) -> None:
        """Raise PermissionDeniedError unless the user owns the personality or is a bot admin; `doing`
        is what the refusal says only they can do."""
        if not self.can_manage(personality, user_id):
            raise PermissionDeniedError(
                f"Only the owner of {personality.display_name} (or a bot admin) can {doing}."
            )

    def require_binder(
        self, personality: Personality, user_id: str, *, in_guild: bool, can_manage_channel: bool
    ) -> None:
        """Binding to a guild channel needs Manage Channels there (or bot admin).

        A DM belongs to the one user in it, who may choose any personality to talk to there: that
        choice is how a DM conversation starts, so it is not reserved to the personality's owner.
        """
        if in_guild and not can_manage_channel and not self.is_admin(user_id):
            raise PermissionDeniedError("You need the Manage Channels permission in this channel to do that.")
