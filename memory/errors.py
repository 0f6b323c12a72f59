"""Errors whose message is meant for the person who typed the command: one clear line."""

from __future__ import annotations


class UserFacingError(Exception):
    """Shown to the user as is (ephemeral in Discord, one line on the CLI)."""


class NotFoundError(UserFacingError):
    pass


class InvalidInputError(UserFacingError):
    pass


class PermissionDeniedError(UserFacingError):
    pass
