"""`personae db`: the database schema."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bot.cli.output import command_group

if TYPE_CHECKING:
    from bot.cli.output import Subcommands
    from bot.runtime import Core


def add_commands(commands: Subcommands) -> None:
    db = command_group(commands, "db", "database schema")
    db.add_parser("upgrade", help="apply migrations up to the newest schema").set_defaults(
        handler=cmd_db_upgrade
    )


async def cmd_db_upgrade(args: argparse.Namespace, core: Core) -> None:
    """Opening the Core migrated the database; this reports where it stands."""
    from models.migrate import current_revision

    print(f"Database schema at revision {await current_revision(core.engine)} (head).")
