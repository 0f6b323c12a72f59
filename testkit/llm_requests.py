"""What the LLM test server reads of a request: its last user text, the exchanges a summarizer request
asks about, and the simple responders built on them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Responder = Callable[[dict[str, Any]], str]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


_LABEL = re.compile(r"^([^\s:][^:\n]{0,39}?):\s+")


def echo_first_sentence(request: dict[str, Any]) -> str:
    """The last user message's first sentence, at most 24 words (and at most max_tokens words).

    Asked for memories of numbered exchanges (`<exchange n="1">`, as the product's summarizer asks),
    the first sentence of each, under its number, ended as a model ends a sentence it shortened.
    """
    exchanges = exchanges_asked(request)
    if exchanges:
        # Reported, as a summary tells it ("Alice said: ..."): a line copied with its label is no summary.
        firsts = [
            _LABEL.sub(r"\1 said: ", _first_sentence(text, 24), count=1).rstrip(",;:-") for text in exchanges
        ]
        ended = [f if f.endswith((".", "!", "?")) else f"{f}." for f in firsts]
        return "\n".join(f"[{n}] {first}" for n, first in enumerate(ended, start=1))
    limit = min(24, int(request.get("max_tokens") or request.get("max_completion_tokens") or 24))
    return _first_sentence(last_user_text(request), limit)


def _first_sentence(text: str, limit: int) -> str:
    first = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    return " ".join(first.split()[: max(1, limit)]) or "OK."


def last_user_text(request: dict[str, Any]) -> str:
    messages = request.get("messages") or []
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    return content_text(last_user.get("content")) if last_user else ""


def answering_each(text: str) -> Responder:
    """A responder answering `text` for every exchange a summarizer request asks about (numbered, as
    asked), and `text` alone to any other request: a fixed summary for benchmarks."""

    def answer(request: dict[str, Any]) -> str:
        count = len(exchanges_asked(request))
        return "\n".join(f"[{n}] {text}" for n in range(1, count + 1)) if count else text

    return answer


_EXCHANGE_RE = re.compile(r'<exchange n="\d+"[^>]*>\n(.*?)\n</exchange>', re.DOTALL)


def exchanges_asked(request: dict[str, Any]) -> list[str]:
    """The exchanges a summarizer request asks memories of, in order ([] for any other request)."""
    return _EXCHANGE_RE.findall(last_user_text(request))
