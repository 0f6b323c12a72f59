"""One LLM client for the whole process: litellm calls with our own retries, backoff and concurrency bound.

litellm is imported on first use, never at module import: it costs seconds, and most CLI commands never
call a model. Its own retries are switched off so that one policy (ours) decides what is retried, and
every call carries an explicit timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import logging
import math
import os
import random
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from memory.errors import InvalidInputError
from memory.types import ModelConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CONTEXT_WINDOW = 8192
# Slack on top of cfg.timeout for our own guard: litellm's timeout should fire first, ours only catches
# a provider integration that ignores it.
_GUARD_SLACK = 5.0


class LLMError(Exception):
    """Base of the errors this module raises; the message is always one line."""


class LLMConfigError(LLMError, InvalidInputError):
    """The model string, provider, key or model name is wrong: retrying cannot help."""


class LLMUnavailableError(LLMError):
    """The LLM could not answer: timeouts, rate limits, server or connection errors past the retries."""

    def __init__(self, model: str, reason: str) -> None:
        super().__init__(f"LLM {model} unavailable: {reason}")
        self.model = model
        self.reason = reason


@functools.cache
def load_litellm() -> ModuleType:
    """Import litellm once, configured for offline, quiet, library use."""
    # Without this litellm fetches its model price map over the network at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    # Otherwise every exception also prints "Give Feedback / Get Help" banners to stdout.
    litellm.suppress_debug_info = True
    # token_counter would fetch Llama/Cohere tokenizers from the Hugging Face hub (20+ s of retries
    # offline); tiktoken's bundled encodings are close enough for budgeting.
    litellm.disable_hf_tokenizer_download = True
    return litellm


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _error_detail(exc: BaseException) -> str:
    """The provider's own words, without litellm's repeated class-name prefixes."""
    message = str(getattr(exc, "message", "") or exc)
    message = re.sub(r"^(litellm\.\w+:\s*)?(\w+Error:\s*)?(\w+Exception\s*-\s*)?", "", message.strip())
    return _one_line(message, 160)


@dataclass(frozen=True, slots=True)
class LLMFailure:
    """How one failed call should be handled."""

    retryable: bool
    reason: str
    config_error: bool = False
    retry_after: float | None = None


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
    import openai  # litellm's exceptions subclass the OpenAI SDK's; importing litellm loaded it already

    litellm = load_litellm()
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return LLMFailure(True, f"timed out after {timeout:g} s")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return LLMFailure(False, f"rejected the API key: {_error_detail(exc)}", config_error=True)
    if isinstance(exc, openai.NotFoundError):
        return LLMFailure(False, f"model not found: {_error_detail(exc)}", config_error=True)
    if isinstance(exc, litellm.LiteLLMUnknownProvider) or "LLM Provider NOT provided" in str(exc):
        return LLMFailure(False, "unknown provider (use a litellm model string)", config_error=True)
    if isinstance(exc, openai.RateLimitError):
        return LLMFailure(
            True, f"rate limited (429): {_error_detail(exc)}", retry_after=_retry_after_seconds(exc)
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
                True, f"server error {status}: {_error_detail(exc)}", retry_after=_retry_after_seconds(exc)
            )
        return LLMFailure(False, f"error {status}: {_error_detail(exc)}")
    return None


class LLMClient:
    """Calls chat models through litellm with a per-provider concurrency bound and retries."""

    def __init__(
        self,
        *,
        max_concurrency_per_provider: int = 4,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        if max_concurrency_per_provider < 1:
            raise ValueError("max_concurrency_per_provider must be at least 1")
        self.max_concurrency_per_provider = max_concurrency_per_provider
        self.max_retries = max(0, max_retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._semaphores: dict[tuple[str, str | None], asyncio.Semaphore] = {}
        # Replaceable so tests can observe backoff delays without waiting for them.
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    # ----------------------------------------------------------------- public API

    async def complete(
        self, cfg: ModelConfig, messages: list[dict[str, str]], *, max_tokens: int | None = None
    ) -> str:
        """The model's reply text; raises LLMConfigError or LLMUnavailableError."""
        litellm = load_litellm()
        self._check_model(cfg.model, cfg.api_base)
        kwargs = self._call_kwargs(cfg, max_tokens)
        semaphore = self._semaphore(cfg)

        async def attempt() -> str:
            async with semaphore, asyncio.timeout(cfg.timeout + _GUARD_SLACK):
                response = await litellm.acompletion(messages=messages, **kwargs)
            content = response.choices[0].message.content
            return content if isinstance(content, str) else ""

        return await self._with_retries(cfg, attempt)

    async def stream(
        self, cfg: ModelConfig, messages: list[dict[str, str]], *, max_tokens: int | None = None
    ) -> AsyncGenerator[str, None]:
        """Yield the reply in text deltas; retried only until the first text arrives."""
        litellm = load_litellm()
        self._check_model(cfg.model, cfg.api_base)
        kwargs = self._call_kwargs(cfg, max_tokens)
        semaphore = self._semaphore(cfg)

        async def open_stream() -> tuple[Any, str | None]:
            # The slot stays taken for the whole stream, so it is released here only on failure.
            await semaphore.acquire()
            response: Any = None
            try:
                async with asyncio.timeout(cfg.timeout + _GUARD_SLACK):
                    response = await litellm.acompletion(messages=messages, stream=True, **kwargs)
                    return response, await _next_text(response)
            except BaseException:
                semaphore.release()
                if response is not None:
                    await _close_stream(response)
                raise

        response, first = await self._with_retries(cfg, open_stream)
        try:
            if first is None:
                return
            yield first
            while True:
                try:
                    text = await _next_text(response)
                except Exception as exc:
                    failure = classify_llm_error(exc, cfg.timeout)
                    if failure is None:
                        raise
                    raise LLMUnavailableError(cfg.model, f"{failure.reason} (mid-stream)") from exc
                if text is None:
                    return
                yield text
        finally:
            semaphore.release()
            await _close_stream(response)

    def count_tokens(
        self, model: str, text: str | None = None, messages: list[dict[str, Any]] | None = None
    ) -> int:
        """Tokens in `text` or `messages` for `model`, offline; a character estimate if litellm can't."""
        if text is None and not messages:
            return 0
        try:
            return int(load_litellm().token_counter(model=model, text=text, messages=messages))
        except Exception:
            log.debug("token_counter failed for %s; estimating", model, exc_info=True)
            parts = [text or ""] + [str(m.get("content") or "") for m in messages or []]
            # About four characters per token, plus a few tokens of chat framing per message.
            return sum(math.ceil(len(p) / 4) for p in parts) + 4 * len(messages or [])

    def context_window(self, cfg: ModelConfig) -> int:
        """Input tokens the model accepts: the config's own figure, litellm's, or a safe default."""
        if cfg.context_window:
            return cfg.context_window
        try:
            value = load_litellm().get_model_info(cfg.model).get("max_input_tokens")
        except Exception:
            return DEFAULT_CONTEXT_WINDOW
        return int(value) if value else DEFAULT_CONTEXT_WINDOW

    def validate_model(self, model: str) -> None:
        """Raise LLMConfigError unless litellm knows the model string's provider (no network)."""
        self._check_model(model, None)

    # ----------------------------------------------------------------- internals

    def _check_model(self, model: str, api_base: str | None) -> None:
        if not model or not model.strip() or model != model.strip():
            raise LLMConfigError(f"Invalid model string {model!r}: expected e.g. 'openai/gpt-4o-mini'")
        try:
            load_litellm().get_llm_provider(model, api_base=api_base)
        except Exception:
            raise LLMConfigError(
                f"Unknown LLM provider in model {model!r}: use a litellm model string such as "
                "'openai/gpt-4o-mini' or 'ollama/llama3.1'"
            ) from None

    def _semaphore(self, cfg: ModelConfig) -> asyncio.Semaphore:
        # Keyed by endpoint too: two OpenAI-compatible servers (say a local vLLM and OpenAI itself)
        # share the "openai" prefix but not their capacity.
        key = (cfg.provider, cfg.api_base)
        semaphore = self._semaphores.get(key)
        if semaphore is None:
            semaphore = self._semaphores[key] = asyncio.Semaphore(self.max_concurrency_per_provider)
        return semaphore

    def _call_kwargs(self, cfg: ModelConfig, max_tokens: int | None) -> dict[str, Any]:
        return {
            "model": cfg.model,
            "api_base": cfg.api_base,
            "api_key": cfg.api_key,
            "temperature": cfg.temperature,
            "max_tokens": max_tokens or cfg.max_tokens,
            "timeout": cfg.timeout,
            # Ours are the only retries: litellm's wrapper (num_retries) and the OpenAI SDK's (max_retries).
            "num_retries": 0,
            "max_retries": 0,
            # Models that reject a parameter (temperature on reasoning models) still answer.
            "drop_params": True,
        }

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_max)
        delay = min(self.backoff_max, self.backoff_base * 2**attempt)
        return delay * random.uniform(0.5, 1.0)  # jitter spreads out callers that failed together

    async def _with_retries(self, cfg: ModelConfig, attempt: Callable[[], Awaitable[T]]) -> T:
        attempts = self.max_retries + 1
        for number in range(attempts):
            try:
                return await attempt()
            except Exception as exc:
                failure = classify_llm_error(exc, cfg.timeout)
                if failure is None:
                    raise
                if failure.config_error:
                    raise LLMConfigError(f"LLM {cfg.model}: {failure.reason}") from exc
                if not failure.retryable:
                    raise LLMUnavailableError(cfg.model, failure.reason) from exc
                if number + 1 == attempts:
                    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
                    raise LLMUnavailableError(cfg.model, f"{failure.reason} ({tries})") from exc
                delay = self._backoff(number, failure.retry_after)
                log.warning(
                    "LLM %s: %s; retry %d/%d in %.2f s",
                    cfg.model,
                    failure.reason,
                    number + 1,
                    self.max_retries,
                    delay,
                )
                await self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")


async def _next_text(response: Any) -> str | None:
    """The next non-empty text delta of a litellm stream, or None at its end."""
    async for chunk in response:
        if not chunk.choices:
            continue  # the usage-only chunk
        text = chunk.choices[0].delta.content
        if text:
            return str(text)
    return None


async def _close_stream(response: Any) -> None:
    """Release the HTTP connection of a stream that was not read to its end."""
    close = getattr(response, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
