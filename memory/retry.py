"""How a call to a model fails and whether it is tried again: the one retry policy (tenacity).

Chat, summaries and embeddings all go through `RetryPolicy.call`: litellm's and the OpenAI SDK's own
retries are switched off at each call site, so this is the only place that decides what is retried,
how long to wait, and how a failure reaches the caller (LLMConfigError: fix the configuration;
LLMUnavailableError: the model could not answer). Messages are always one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity

from memory.errors import InvalidInputError

log = logging.getLogger(__name__)

T = TypeVar("T")


class LLMError(Exception):
    """Base of the errors this module raises; the message is always one line."""


class LLMConfigError(LLMError, InvalidInputError):
    """The model string, provider, key or model name is wrong: retrying cannot help.

    `reason` is the message without the model's name, for reports that count failures by reason.
    """

    def __init__(self, message: str, *, reason: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message
        self.fix = fix  # what to set right: "key" or "model" (None: see the message)


class NoChoicesError(LLMError):
    """The provider answered 200 with no choice at all: an answer with nothing in it."""


class LLMUnavailableError(LLMError):
    """The LLM could not answer: timeouts, rate limits, server or connection errors past the retries."""

    def __init__(self, model: str, reason: str) -> None:
        super().__init__(f"LLM {model} unavailable: {reason}")
        self.model = model
        self.reason = reason


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _error_detail(exc: BaseException) -> str:
    """The provider's own words, without litellm's repeated class-name prefixes."""
    message = str(getattr(exc, "message", "") or exc)
    message = re.sub(r"^(litellm\.\w+:\s*)?(\w+Error:\s*)?(\w+Exception\s*-\s*)?", "", message.strip())
    return _one_line(message, 160)


# How litellm and the OpenAI SDK say that no key was given (litellm wraps it as a server error 500).
_MISSING_KEY_RE = re.compile(r"Missing credentials|api_key client option must be set|No API key provided")
# Statuses that mean "too many calls right now": 429, 503 and Anthropic's 529 "overloaded".
_OVERLOADED = frozenset({429, 503, 529})


@dataclass(frozen=True, slots=True)
class LLMFailure:
    """How one failed call should be handled."""

    retryable: bool
    reason: str
    config_error: bool = False
    retry_after: float | None = None
    # The provider is overloaded (429, 503, 529) or too slow to answer: fewer calls should be in flight.
    congestion: bool = False
    # For a configuration error, what to set right: "key" or "model".
    fix: str | None = None


def _retry_after_seconds(exc: BaseException) -> float | None:
    """Retry-After (seconds or an HTTP date) or retry-after-ms from the error response, if any."""
    headers: Any = getattr(exc, "litellm_response_headers", None)
    if not headers:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    with contextlib.suppress(ValueError):
        if "retry-after-ms" in lowered:
            return float(lowered["retry-after-ms"]) / 1000
        if "retry-after" in lowered:
            return float(lowered["retry-after"])
    if "retry-after" in lowered:
        with contextlib.suppress(TypeError, ValueError):
            when = email.utils.parsedate_to_datetime(lowered["retry-after"])
            return max(0.0, when.timestamp() - time.time())
    return None


def classify_llm_error(exc: BaseException, timeout: float) -> LLMFailure | None:
    """What a litellm error means for us; None for an exception that is not an LLM failure (a bug)."""
    # Only litellm raises what is classified here, so both are loaded already: these imports are free.
    import litellm
    import openai

    if isinstance(exc, NoChoicesError):
        return LLMFailure(False, "answered with no choices")
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return LLMFailure(True, f"timed out after {timeout:g} s", congestion=True)
    if _MISSING_KEY_RE.search(str(exc)):
        # litellm reports a key missing from the client as a server error 500; retrying cannot help.
        return LLMFailure(False, "missing API key", config_error=True, fix="key")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return LLMFailure(False, f"rejected the API key: {_error_detail(exc)}", config_error=True, fix="key")
    if isinstance(exc, openai.NotFoundError):
        return LLMFailure(False, f"model not found: {_error_detail(exc)}", config_error=True, fix="model")
    if isinstance(exc, litellm.LiteLLMUnknownProvider) or "LLM Provider NOT provided" in str(exc):
        return LLMFailure(
            False, "unknown provider (use a litellm model string)", config_error=True, fix="model"
        )
    if isinstance(exc, openai.RateLimitError):
        return LLMFailure(
            True,
            f"rate limited (429): {_error_detail(exc)}",
            retry_after=_retry_after_seconds(exc),
            congestion=True,
        )
    if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError):
        return LLMFailure(False, f"rejected the request: {_error_detail(exc)}")
    if isinstance(exc, openai.APIConnectionError | ConnectionError):
        return LLMFailure(True, f"connection failed: {_error_detail(exc)}")
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.APIError):
        # A dropped connection reaches us as InternalServerError("Connection error.") with status 500.
        if "Connection error" in str(exc):
            return LLMFailure(True, "connection dropped")
        if isinstance(status, int) and (status >= 500 or status in (408, 409, 425, 429)):
            return LLMFailure(
                True,
                f"server error {status}: {_error_detail(exc)}",
                retry_after=_retry_after_seconds(exc),
                congestion=status in _OVERLOADED,
            )
        return LLMFailure(False, f"error {status}: {_error_detail(exc)}")
    return None


@dataclass(slots=True)
class RetryPolicy:
    """The one retry policy for model calls (chat, summaries, embeddings), run by tenacity.

    Retried: timeouts, rate limits, server errors and dropped connections, up to `max_retries` times
    after the first attempt, with jittered exponential backoff from `backoff_base` up to `backoff_max`;
    a Retry-After the provider sent is honoured instead, capped at `backoff_max`. A bad request or a
    configuration error (key, model, provider) is never retried: it raises at once.
    """

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    # Replaceable so tests can observe the delays without waiting for them.
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def call(
        self,
        model: str,
        call_timeout: float,
        attempt: Callable[[], Awaitable[T]],
        *,
        config_label: str = "LLM",
        reason_prefix: str = "",
    ) -> T:
        """`attempt()` under this policy; failures become LLMConfigError or LLMUnavailableError."""
        # The first attempt runs outside tenacity: most calls succeed at once, and setting up its
        # retrying object costs ~0.04 ms of the event loop per call (one object cannot serve
        # concurrent calls: tenacity keeps a call's state per thread, shared by every task in it).
        # A failed first attempt is replayed as tenacity's first, so what follows is unchanged.
        try:
            return await attempt()
        except Exception as exc:
            first_failure = exc
        attempts = max(0, self.max_retries) + 1

        def failure_of(exc: BaseException | None) -> LLMFailure | None:
            return classify_llm_error(exc, call_timeout) if exc is not None else None

        def retryable(exc: BaseException) -> bool:
            failure = failure_of(exc)
            return failure is not None and failure.retryable

        backoff = tenacity.wait_exponential(multiplier=self.backoff_base, max=self.backoff_max)

        def wait(state: tenacity.RetryCallState) -> float:
            failure = failure_of(state.outcome.exception() if state.outcome else None)
            if failure is not None and failure.retry_after is not None:
                return min(max(failure.retry_after, 0.0), self.backoff_max)
            # Jitter spreads out callers that failed together.
            return backoff(state) * random.uniform(0.5, 1.0)

        def log_retry(state: tenacity.RetryCallState) -> None:
            failure = failure_of(state.outcome.exception() if state.outcome else None)
            reason = failure.reason if failure else "failed"
            delay = state.next_action.sleep if state.next_action else 0.0
            # INFO: a retry is routine; what fails past the retries is reported by the caller.
            log.info(
                "%s %s: %s; retry %d/%d in %.2f s",
                config_label,
                model,
                reason,
                state.attempt_number,
                self.max_retries,
                delay,
            )

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=wait,
            retry=tenacity.retry_if_exception(retryable),
            sleep=self.sleep,
            before_sleep=log_retry,
            reraise=True,
        )
        made = 0
        try:
            async for try_ in retrying:
                made = try_.retry_state.attempt_number
                with try_:
                    if made == 1:
                        raise first_failure
                    return await attempt()
        except Exception as exc:
            failure = failure_of(exc)
            if failure is None:
                raise
            if failure.config_error:
                raise LLMConfigError(
                    f"{config_label} {model}: {failure.reason}", reason=failure.reason, fix=failure.fix
                ) from exc
            reason = reason_prefix + failure.reason
            if failure.retryable:
                reason += " (1 attempt)" if made == 1 else f" ({made} attempts)"
            raise LLMUnavailableError(model, reason) from exc
        raise AssertionError("unreachable: tenacity returns or raises")
