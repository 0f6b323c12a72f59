"""Logging for the command line: services log at LOG_LEVEL, one-shot commands show only problems."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from bot.disk_full import DiskFullLog

if TYPE_CHECKING:
    from bot.settings import BotSettings

# Library chatter (pgserver's start-up, httpx requests) is noise on a CLI.
NOISY_LOGGERS = ("pgserver", "httpx", "LiteLLM", "litellm", "alembic")


def configure_logging(
    settings: BotSettings, *, verbose: bool, long_running: bool, log_file: Path | None = None
) -> None:
    """`long_running`: the bot and the worker, whose logs are their output; `log_file`: logs go there,
    at LOG_LEVEL, instead of to the terminal (the chat, whose screen is the conversation)."""
    level = getattr(logging, settings.log_level)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
    elif not long_running:
        level = max(logging.WARNING, level)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.basicConfig(
        level=logging.DEBUG if verbose else level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        filename=log_file,
    )
    for handler in logging.getLogger().handlers:  # a full disk in one line, not a traceback
        for old in [f for f in handler.filters if isinstance(f, DiskFullLog)]:
            handler.removeFilter(old)  # a second command in one process (a test) replaces it
        handler.addFilter(DiskFullLog(settings.personae_data_dir, database_url=bool(settings.database_url)))
    if not verbose:
        for noisy in NOISY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.WARNING)
