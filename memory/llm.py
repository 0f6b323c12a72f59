"""One LLM client for the whole process: litellm calls under one retry policy and adaptive concurrency.

litellm is imported on first use, never at module import: it costs seconds, and most CLI commands never
call a model. Its own retries (and the OpenAI SDK's) are switched off so that one policy, `RetryPolicy`
(tenacity), decides what is retried, for chat, summaries and embeddings alike; every call carries an
explicit timeout. How many calls each provider endpoint gets at once is found by an `AdaptiveLimit`
(memory/concurrency.py) under the configured ceiling; a refused attempt leaves its place before the
retry policy waits, so a retry never holds a place while it sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import os
import warnings
from collections.abc import AsyncGenerator, Iterator
from types import ModuleType
from typing import Any, cast
from urllib.parse import urlsplit

from memory.concurrency import AdaptiveLimit, LimitStats, Slot
from memory.retry import (
    LLMConfigError,
    LLMUnavailableError,
    NoChoicesError,
    RetryPolicy,
    classify_llm_error,
)
from memory.types import ModelConfig

__all__ = [
    "DEFAULT_CONCURRENCY_CEILING",
    "DEFAULT_CONTEXT_WINDOW",
    "INITIAL_CONCURRENCY",
    "LLMClient",
    "LLMConfigError",
    "LLMTimeoutError",
    "LLMUnavailableError",
    "NoChoicesError",
    "RetryPolicy",
    "classify_llm_error",
    "load_litellm",
    "report_failure",
]

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 8192
# Calls in flight per provider: each limit starts here and finds its level up to the ceiling.
INITIAL_CONCURRENCY = 4
DEFAULT_CONCURRENCY_CEILING = 64
# Slack on top of cfg.timeout for our own guard: litellm's timeout should fire first, ours only catches
# a provider integration that ignores it.
_GUARD_SLACK = 5.0
# A stream that sends no text for this long (or cfg.timeout, if shorter) is cut: empty deltas keep a
# connection alive without answering. The whole stream must end within STREAM_TOTAL_TIMEOUTS times
# cfg.timeout of its opening.
STREAM_IDLE_SECONDS = 20.0
STREAM_TOTAL_TIMEOUTS = 2
# Sent as the key to an endpoint given without one: local OpenAI-compatible servers (LM Studio,
# llama.cpp, vLLM) ignore it, and the OpenAI SDK refuses to send a request with no key at all.
PLACEHOLDER_API_KEY = "no-key"


class LLMTimeoutError(LLMUnavailableError):
    """The model did not answer within LLM_TIMEOUT: slow, not unreachable (a smaller request may do)."""

    def __init__(self, model: str, timeout: float) -> None:
        super().__init__(model, f"timed out after {timeout:g} s (raise LLM_TIMEOUT for a slow model)")


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
    # The embedding path reads `max_retries or DEFAULT_MAX_RETRIES`, so our max_retries=0 would mean
    # the SDK's two silent retries on top of RetryPolicy's; with this default, 0 means none.
    litellm.DEFAULT_MAX_RETRIES = 0  # Final in litellm, read at call time
    # aembedding builds its request coroutine in an executor thread: a call cancelled there (a stopped
    # import, a pass cancelled at shutdown) leaves it unawaited, and Python prints a RuntimeWarning.
    warnings.filterwarnings("ignore", "coroutine '.*aembedding' was never awaited", RuntimeWarning)
    return cast(ModuleType, litellm)  # read as Any (pyproject: mypy does not follow litellm)


class LLMClient:
    """Calls chat models through litellm with adaptive per-provider concurrency and retries.

    `max_concurrency_per_provider` is the ceiling each provider's limit may grow to; it starts at
    `initial_concurrency` (or the ceiling, if lower); unset, at INITIAL_CONCURRENCY, or at one for a
    server on this machine.
    """

    def __init__(
        self,
        *,
        max_concurrency_per_provider: int = DEFAULT_CONCURRENCY_CEILING,
        initial_concurrency: int | None = None,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        stream_idle_seconds: float = STREAM_IDLE_SECONDS,
    ) -> None:
        if max_concurrency_per_provider < 1 or (initial_concurrency is not None and initial_concurrency < 1):
            raise ValueError("max_concurrency_per_provider and initial_concurrency must be at least 1")
        self.max_concurrency_per_provider = max_concurrency_per_provider
        self.initial_concurrency = initial_concurrency
        self.retry = RetryPolicy(
            max_retries=max(0, max_retries), backoff_base=backoff_base, backoff_max=backoff_max
        )
        self._limits: dict[tuple[str, str | None], AdaptiveLimit] = {}
        self.stream_idle_seconds = stream_idle_seconds

    # ----------------------------------------------------------------- public API

    async def complete(
        self,
        cfg: ModelConfig,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        retry_timeouts: bool = True,
    ) -> str:
        """The model's reply text; raises LLMConfigError or LLMUnavailableError.

        With `retry_timeouts` False a timeout raises LLMTimeoutError at once: the caller can ask for
        less (a batch split in two) rather than wait for the same request to time out again.
        """
        litellm = load_litellm()
        self._check_model(cfg.model, cfg.api_base)
        kwargs = self._call_kwargs(cfg, max_tokens)
        limit = self.limit_for(cfg.provider, cfg.api_base)

        tried = False

        async def attempt() -> str:
            nonlocal tried
            slot = await limit.acquire(retry=tried)
            tried = True
            try:
                async with asyncio.timeout(cfg.timeout + _GUARD_SLACK):
                    response = await litellm.acompletion(messages=messages, **kwargs)
                slot.succeeded()
            except Exception as exc:
                report_failure(slot, exc, cfg.timeout)
                if not retry_timeouts and _is_timeout(exc):
                    raise LLMTimeoutError(cfg.model, cfg.timeout) from exc
                raise
            finally:
                slot.release()
            if not response.choices:
                raise NoChoicesError("the provider answered with no choices")
            content = response.choices[0].message.content
            return content if isinstance(content, str) else ""

        with _naming_the_setting(cfg):
            return await self.retry.call(cfg.model, cfg.timeout, attempt)

    async def stream(
        self, cfg: ModelConfig, messages: list[dict[str, str]], *, max_tokens: int | None = None
    ) -> AsyncGenerator[str, None]:
        """Yield the reply in text deltas; retried only until the first text arrives.

        The stream is cut with LLMUnavailableError when no text comes for `stream_idle_seconds` (or
        cfg.timeout, if shorter), or when it has not ended within STREAM_TOTAL_TIMEOUTS x cfg.timeout of
        its opening (a long reply streams for longer than one call takes to answer).
        """
        litellm = load_litellm()
        self._check_model(cfg.model, cfg.api_base)
        kwargs = self._call_kwargs(cfg, max_tokens)
        limit = self.limit_for(cfg.provider, cfg.api_base)
        idle = min(cfg.timeout, self.stream_idle_seconds)
        loop = asyncio.get_running_loop()

        tried = False

        async def open_stream() -> tuple[Any, str | None, Slot, float]:
            nonlocal tried
            # The slot stays taken for the whole stream, so it is released here only on failure.
            slot = await limit.acquire(retry=tried)
            tried = True
            response: Any = None
            opened = loop.time()
            try:
                async with asyncio.timeout(cfg.timeout + _GUARD_SLACK):
                    response = await litellm.acompletion(messages=messages, stream=True, **kwargs)
                async with asyncio.timeout(idle):
                    first = await _next_text(response)
                # No latency sample: a stream's first text comes sooner than a whole reply would.
                slot.succeeded(sample_latency=False)
                return response, first, slot, opened
            except BaseException as exc:
                if isinstance(exc, Exception):
                    report_failure(slot, exc, cfg.timeout)
                slot.release()
                if response is not None:
                    await _close_stream(response)
                raise

        with _naming_the_setting(cfg):
            response, first, slot, opened = await self.retry.call(cfg.model, cfg.timeout, open_stream)
        total = STREAM_TOTAL_TIMEOUTS * cfg.timeout
        deadline = opened + total
        try:
            if first is None:
                return
            yield first
            while True:
                wait = min(idle, deadline - loop.time())
                try:
                    async with asyncio.timeout(max(0.0, wait)):
                        text = await _next_text(response)
                except TimeoutError as exc:
                    reason = f"no text for {idle:g} s" if wait >= idle else f"not done within {total:g} s"
                    raise LLMUnavailableError(cfg.model, f"stream cut: {reason} (partial answer)") from exc
                except Exception as exc:
                    failure = classify_llm_error(exc, cfg.timeout)
                    if failure is None:
                        raise
                    raise LLMUnavailableError(cfg.model, f"{failure.reason} (mid-stream)") from exc
                if text is None:
                    return
                yield text
        finally:
            slot.release()
            await _close_stream(response)

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

    def _check_key(self, cfg: ModelConfig) -> None:
        """Raise LLMConfigError when the provider needs a key that neither the config nor the
        environment gives (no request is sent: it could only fail)."""
        if cfg.api_key or cfg.api_base:
            return
        missing = _missing_keys(cfg.model)
        if missing:
            setting = cfg.key_setting or missing[0]
            reason = f"missing API key (set {setting})"
            raise LLMConfigError(f"LLM {cfg.model}: {reason}", reason=reason, fix="key")

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

    def limit_for(self, provider: str, api_base: str | None) -> AdaptiveLimit:
        """The concurrency limit of one provider endpoint, shared by every call to it."""
        # Keyed by endpoint too: two OpenAI-compatible servers (say a local vLLM and OpenAI itself)
        # share the "openai" prefix but not their capacity.
        key = (provider, api_base)
        limit = self._limits.get(key)
        if limit is None:
            name = f"{provider} at {api_base}" if api_base else provider
            # A server on this machine (llama.cpp, Ollama, LM Studio) serves one request at a time
            # unless told otherwise: four sent at once wait in its queue until the timeout. It starts
            # at one and grows only while calls come back no slower than the fastest seen.
            initial = self.initial_concurrency
            if initial is None:
                initial = 1 if is_local_endpoint(api_base) else INITIAL_CONCURRENCY
            limit = self._limits[key] = AdaptiveLimit(
                name, ceiling=self.max_concurrency_per_provider, initial=initial
            )
        return limit

    def concurrency_stats(self) -> list[LimitStats]:
        """Where each provider's limit stands now (for logs and benchmarks)."""
        return [limit.stats() for limit in self._limits.values()]

    def _call_kwargs(self, cfg: ModelConfig, max_tokens: int | None) -> dict[str, Any]:
        self._check_key(cfg)
        return {
            "model": cfg.model,
            "api_base": cfg.api_base,
            "api_key": cfg.api_key or (PLACEHOLDER_API_KEY if cfg.api_base else None),
            "temperature": cfg.temperature,
            "max_tokens": max_tokens or cfg.max_tokens,
            "timeout": cfg.timeout,
            # Ours are the only retries: litellm's wrapper (num_retries) and the OpenAI SDK's (max_retries).
            "num_retries": 0,
            "max_retries": 0,
            # Models that reject a parameter (temperature on reasoning models) still answer.
            "drop_params": True,
        }


def is_local_endpoint(api_base: str | None) -> bool:
    """Whether the endpoint is a server on this machine (a loopback address or localhost)."""
    if not api_base:
        return False
    host = (urlsplit(api_base).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=64)
def _missing_keys(model: str) -> list[str]:
    """The API key variables litellm wants for `model` and finds neither given nor in the environment."""
    try:
        found = load_litellm().validate_environment(model)
    except Exception:
        return []  # unknown to litellm: the provider check says so
    return [key for key in found.get("missing_keys") or [] if key.endswith("_KEY")]


@contextlib.contextmanager
def _naming_the_setting(cfg: ModelConfig) -> Iterator[None]:
    """Add to a configuration error the setting that fixes it (SUMMARIZER_API_KEY, an LLM config)."""
    try:
        yield
    except LLMConfigError as exc:
        setting = {"key": cfg.key_setting, "model": cfg.model_setting}.get(exc.fix or "")
        if setting is None or setting in str(exc):
            raise
        verb = "set" if exc.reason == "missing API key" else "check"
        reason = f"{exc.reason} ({verb} {setting})"
        raise LLMConfigError(f"LLM {cfg.model}: {reason}", reason=reason, fix=exc.fix) from exc


def _is_timeout(exc: BaseException) -> bool:
    import openai  # loaded with litellm, which raised this

    return isinstance(exc, openai.APITimeoutError | TimeoutError)


def report_failure(slot: Slot, exc: BaseException, timeout: float) -> None:
    """Tell the limit about a failed attempt: a refusal or a timeout cuts it, other failures do not."""
    failure = classify_llm_error(exc, timeout)
    if failure is not None and failure.congestion:
        slot.congested(failure.reason)


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
