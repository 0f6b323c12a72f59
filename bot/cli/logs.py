"""Logging for the command line: services log at LOG_LEVEL, one-shot commands show only problems."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

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
    if not verbose:
        for noisy in NOISY_LOGGERS:
            logging.getLogger(noisy).setLevel(logging.WARNING)
