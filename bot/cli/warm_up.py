"""The model client loaded off the event loop at start: litellm's import (seconds) and the modules its
first call loads (seconds more: the OpenAI SDK's resources, the streaming path), and the word tables
recall reads (wordfreq's, a second), happen in a thread of their own while the database and the index
open, so that no reply and no Discord interaction waits on them on the event loop (a first slash
command answered late is "This interaction failed")."""

from __future__ import annotations

import asyncio
import logging
import threading
from functools import partial

log = logging.getLogger(__name__)

READY_WAIT = 60  # seconds: a loaded machine imports litellm in ~8


class ModelClientWarmUp:
    """`warm_up_recall`, then `warm_up_llm`, in a daemon thread from now on (a command that ends first
    does not wait for it); `ready` waits for them without holding the event loop."""

    def __init__(self, model: str | None) -> None:
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(model,), name="llm-warm-up", daemon=True).start()

    def _run(self, model: str | None) -> None:
        from memory.warm_up import warm_up_llm, warm_up_recall

        try:
            # The shorter first; a reply needs both, and one failing does not keep the other from loading.
            steps = (
                ("recall's word tables", warm_up_recall),
                ("the model client", partial(warm_up_llm, model)),
            )
            for what, warm_up in steps:
                try:
                    warm_up()
                except Exception:  # the first real call loads what is missing, and says what is wrong
                    log.warning("Loading %s ahead of the first reply failed", what, exc_info=True)
        finally:
            self._done.set()

    async def ready(self) -> None:
        """Once loaded, or after READY_WAIT seconds (a first call then finishes the loading itself)."""
        if not self._done.is_set() and not await asyncio.to_thread(self._done.wait, READY_WAIT):
            log.warning("The model client was still loading after %d s; going on", READY_WAIT)
