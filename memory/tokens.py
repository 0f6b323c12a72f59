"""The one token counter: the model's own tokenizer through litellm, else cl100k_base.

Every budget in Personae (the prompt within the context window, summary caps, chunking, memory
text) is counted here. With a model named, litellm's `token_counter` uses that model's tokenizer.
Without one, or when litellm cannot tokenize for it offline (an unknown model whose tokenizer lives
on a hub), the documented fallback is tiktoken's `cl100k_base`: close enough for budgets, fast, and
offline, from the copy litellm ships (so no download is ever attempted).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FALLBACK_ENCODING = "cl100k_base"
# Chat framing per message (role, separators), as OpenAI documents for its chat models.
TOKENS_PER_MESSAGE = 4


@functools.cache
def _encoding() -> Any:
    """cl100k_base from litellm's bundled tiktoken cache, found without importing litellm (slow)."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        spec = importlib.util.find_spec("litellm")
        if spec is not None and spec.origin is not None:
            bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
            if bundled.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    import tiktoken

    return tiktoken.get_encoding(FALLBACK_ENCODING)


def _litellm() -> Any | None:
    """litellm only once something else loaded it: counting never pays its seconds-long import."""
    return sys.modules.get("litellm")


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in `text` for `model`'s tokenizer, or cl100k_base when no model is named."""
    if not text:
        return 0
    litellm = _litellm() if model else None
    if litellm is not None:
        try:
            return int(litellm.token_counter(model=model, text=text))
        except Exception:
            log.debug(
                "token_counter failed for %s; counting with %s", model, FALLBACK_ENCODING, exc_info=True
            )
    return len(_encoding().encode(text, disallowed_special=()))


def count_message_tokens(messages: Sequence[dict[str, Any]], model: str | None = None) -> int:
    """Tokens of chat `messages` for `model`, framing included."""
    if not messages:
        return 0
    litellm = _litellm() if model else None
    if litellm is not None:
        try:
            return int(litellm.token_counter(model=model, messages=list(messages)))
        except Exception:
            log.debug(
                "token_counter failed for %s; counting with %s", model, FALLBACK_ENCODING, exc_info=True
            )
    return sum(count_tokens(str(m.get("content") or "")) + TOKENS_PER_MESSAGE for m in messages)


def truncate_to_tokens(text: str, max_tokens: int, *, keep_end: bool = False) -> str:
    """The first (or last, with keep_end) `max_tokens` cl100k tokens of `text`, cut at a word boundary."""
    if max_tokens <= 0:
        return ""
    encoding = _encoding()
    tokens = encoding.encode(text, disallowed_special=())
    if len(tokens) <= max_tokens:
        return text
    kept: str
    if keep_end:
        kept = encoding.decode(tokens[-max_tokens:])
        whole = text.endswith(kept) and (len(kept) == len(text) or text[-len(kept) - 1].isspace())
        space = kept.find(" ")
        # A token boundary can fall inside a word: drop the partial word when a whole one remains.
        return kept.strip() if whole or space < 0 else kept[space + 1 :].strip()
    kept = encoding.decode(tokens[:max_tokens])
    whole = text.startswith(kept) and text[len(kept) : len(kept) + 1].isspace()
    space = kept.rfind(" ")
    return kept.strip() if whole or space <= 0 else kept[:space].strip()
