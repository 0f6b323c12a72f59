"""The `personae` command line: one module per command group, plus the terminal chat and the demo.

Heavy imports (SQLAlchemy, litellm, discord, torch) happen inside commands so `--help` stays instant.
"""

from bot.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
