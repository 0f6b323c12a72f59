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
import logging
import os
from collections.abc import AsyncGenerator
from types import ModuleType
from typing import Any

from memory.concurrency import AdaptiveLimit, LimitStats, Slot
from memory.retry import (
    LLMConfigError,
    LLMUnavailableError,
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
    "LLMUnavailableError",
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
    litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[attr-defined]  # Final in litellm, read at call time
    return litellm


class LLMClient:
    """Calls chat models through litellm with adaptive per-provider concurrency and retries.

    `max_concurrency_per_provider` is the ceiling each provider's limit may grow to; it starts at
    `initial_concurrency` (or the ceiling, if lower).
    """

    def __init__(
        self,
        *,
        max_concurrency_per_provider: int = DEFAULT_CONCURRENCY_CEILING,
        initial_concurrency: int = INITIAL_CONCURRENCY,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        if max_concurrency_per_provider < 1 or initial_concurrency < 1:
            raise ValueError("max_concurrency_per_provider and initial_concurrency must be at least 1")
        self.max_concurrency_per_provider = max_concurrency_per_provider
        self.initial_concurrency = initial_concurrency
        self.retry = RetryPolicy(
            max_retries=max(0, max_retries), backoff_base=backoff_base, backoff_max=backoff_max
        )
        self._limits: dict[tuple[str, str | None], AdaptiveLimit] = {}

    # ----------------------------------------------------------------- public API

    async def complete(
        self, cfg: ModelConfig, messages: list[dict[str, str]], *, max_tokens: int | None = None
    ) -> str:
        """The model's reply text; raises LLMConfigError or LLMUnavailableError."""
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
                raise
            finally:
                slot.release()
            content = response.choices[0].message.content
            return content if isinstance(content, str) else ""

        return await self.retry.call(cfg.model, cfg.timeout, attempt)

    async def stream(
        self, cfg: ModelConfig, messages: list[dict[str, str]], *, max_tokens: int | None = None
    ) -> AsyncGenerator[str, None]:
        """Yield the reply in text deltas; retried only until the first text arrives."""
        litellm = load_litellm()
        self._check_model(cfg.model, cfg.api_base)
        kwargs = self._call_kwargs(cfg, max_tokens)
        limit = self.limit_for(cfg.provider, cfg.api_base)

        tried = False

        async def open_stream() -> tuple[Any, str | None, Slot]:
            nonlocal tried
            # The slot stays taken for the whole stream, so it is released here only on failure.
            slot = await limit.acquire(retry=tried)
            tried = True
            response: Any = None
            try:
                async with asyncio.timeout(cfg.timeout + _GUARD_SLACK):
                    response = await litellm.acompletion(messages=messages, stream=True, **kwargs)
                    first = await _next_text(response)
                # No latency sample: a stream's first text comes sooner than a whole reply would.
                slot.succeeded(sample_latency=False)
                return response, first, slot
            except BaseException as exc:
                if isinstance(exc, Exception):
                    report_failure(slot, exc, cfg.timeout)
                slot.release()
                if response is not None:
                    await _close_stream(response)
                raise

        response, first, slot = await self.retry.call(cfg.model, cfg.timeout, open_stream)
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
            limit = self._limits[key] = AdaptiveLimit(
                name, ceiling=self.max_concurrency_per_provider, initial=self.initial_concurrency
            )
        return limit

    def concurrency_stats(self) -> list[LimitStats]:
        """Where each provider's limit stands now (for logs and benchmarks)."""
        return [limit.stats() for limit in self._limits.values()]

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
