"""What the OpenAI-compatible test server (testkit.llm_server) can be scripted to do instead of
answering normally, its OpenAI-style error answers, and the deterministic token counts and embeddings
it answers with."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer with this text instead of the responder's."""

    text: str


@dataclass(frozen=True, slots=True)
class Stall:
    """Sleep this long before answering normally (to trigger client timeouts)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Fail:
    """Answer with an error status and an OpenAI-style error body."""

    status: int = 500
    body: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Drop:
    """Close the TCP connection without sending any response."""


@dataclass(frozen=True, slots=True)
class NoChoices:
    """Answer HTTP 200 with `"choices": []`, as some gateways do after a content filter."""


@dataclass(frozen=True, slots=True)
class Trickle:
    """Stream the answer one word every `interval` seconds, after `idle` seconds of empty deltas
    (one every 0.2 s): a stream that is alive but never ends in time."""

    interval: float = 0.0
    idle: float = 0.0


Behaviour = Reply | Stall | Fail | Drop | NoChoices | Trickle


def estimate_tokens(text: str) -> int:
    """Roughly what a BPE tokenizer gives for English: four characters per token."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def hash_vector(text: str, dim: int) -> list[float]:
    """A deterministic pseudo-embedding; deliberately not unit length so clients must normalize."""
    values: list[float] = []
    for counter in itertools.count():
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((b - 127.5) / 127.5 for b in digest)
        if len(values) >= dim:
            break
    return [v * 3.0 for v in values[:dim]]


class _ErrorReply(Exception):
    """Raised by a handler, turned into an OpenAI-style error response by `error_middleware`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> _ErrorReply:
    return _ErrorReply(status, message, headers)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@web.middleware
async def error_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except _ErrorReply as exc:
        error = {"message": exc.message, "type": _ERROR_TYPES.get(exc.status, "server_error")}
        return web.json_response(
            {"error": {**error, "param": None, "code": None}}, status=exc.status, headers=exc.headers
        )
