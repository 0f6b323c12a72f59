"""What `personae chat` checks of its arguments before anything opens: the user id and the name the
personality sees, as they can be stored."""

from __future__ import annotations

import argparse

from bot.cli.output import ArgumentError

MAX_NAME_LENGTH = 100  # a message's author name (models.Message)


def check_chat_arguments(args: argparse.Namespace) -> None:
    """--user and --name as they can be stored: an id of at most 64 characters, a name of 100."""
    from memory.owners.personality_fields import MAX_ID_LENGTH

    if len(args.user) > MAX_ID_LENGTH:
        raise ArgumentError(
            f"--user is {len(args.user)} characters; a user id is at most {MAX_ID_LENGTH} "
            "(a Discord id has 17 to 20 digits)"
        )
    if len(args.name) > MAX_NAME_LENGTH:
        raise ArgumentError(
            f"--name is {len(args.name)} characters; the name the personality sees is at most "
            f"{MAX_NAME_LENGTH}"
        )
