"""Text embedders: the local all-MiniLM-L6-v2 model (offline, the default) or any litellm embedding model.

The local one runs on onnxruntime (memory/recall/local_embedder.py). Heavy imports (onnxruntime,
litellm) happen on first use, not at module import; torch is never imported at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from memory.llm import LLMConfigError, LLMUnavailableError, RetryPolicy, load_litellm
from memory.recall.local_embedder import LOCAL_MODEL_NAME, LocalEmbedder

_LOCAL_ALIASES = frozenset(
    {LOCAL_MODEL_NAME, f"local/{LOCAL_MODEL_NAME}", f"sentence-transformers/{LOCAL_MODEL_NAME}"}
)


class Embedder(Protocol):
    """Turns texts into dense vectors for the memory index.

    `model_name` is recorded beside every memory so a change of model can be detected and reindexed.
    `dimension` is the length of every vector `embed` returns; it may load the model or ask the
    provider's model info the first time it is read. `embed(texts)` returns one vector per text, in
    input order, each L2-normalized (so a dot product is the cosine similarity); it batches
    internally, so callers may pass any number of texts. An empty input gives an empty list.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def normalize(vector: Sequence[float]) -> list[float]:
    """The vector scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(sum(v * v for v in vector))
    return [float(v) / norm for v in vector] if norm > 0 else [0.0 for _ in vector]


class LiteLLMEmbedder:
    """Any embedding model litellm can reach (OpenAI, Ollama, an OpenAI-compatible server...)."""

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout: float = 30.0,
        *,
        batch_size: int = 128,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._model, self._timeout, self._batch_size = model, timeout, batch_size
        # What every request passes; ours are the only retries (not litellm's wrapper, num_retries,
        # nor the OpenAI SDK's).
        self._request = {
            "model": model,
            "api_base": api_base,
            "api_key": api_key,
            "timeout": timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        self._dimension = dimension
        # Embedding runs off the chat path: a couple of quick retries, then the batch's memories wait.
        self._retry = retry or RetryPolicy(max_retries=2)

    @property
    def model_name(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        """The configured dimension, else the one learned from a reply, else litellm's model info."""
        if self._dimension is None:
            try:
                size = load_litellm().get_model_info(self._model).get("output_vector_size")
            except Exception:
                size = None
            if not size:
                raise LLMConfigError(
                    f"Unknown vector size for embedding model {self._model!r}: set its dimension explicitly"
                )
            self._dimension = int(size)
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order, requested in batches."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(await self._embed_batch(list(texts[start : start + self._batch_size])))
        return vectors

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        litellm = load_litellm()

        async def attempt() -> Any:
            return await litellm.aembedding(input=batch, **self._request)

        response = await self._retry.call(
            self._model,
            self._timeout,
            attempt,
            config_label="Embedding model",
            reason_prefix="embedding failed: ",
        )
        items = sorted(response.data, key=lambda item: _field(item, "index"))
        if len(items) != len(batch):
            raise LLMUnavailableError(self._model, f"returned {len(items)} embeddings for {len(batch)} texts")
        vectors = [normalize(_field(item, "embedding")) for item in items]
        if self._dimension is None:
            self._dimension = len(vectors[0])
        elif any(len(v) != self._dimension for v in vectors):
            raise LLMConfigError(
                f"Embedding model {self._model!r} returned {len(vectors[0])}-d vectors, "
                f"expected {self._dimension}"
            )
        return vectors


def _field(item: Any, name: str) -> Any:
    # litellm gives plain dicts for some providers and objects for others.
    return item[name] if isinstance(item, dict) else getattr(item, name)


def make_embedder(
    model: str,
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
    dimension: int | None = None,
    retry: RetryPolicy | None = None,
    cache_dir: Path | None = None,
    load_now: bool = False,
) -> Embedder:
    """The local model for "all-MiniLM-L6-v2" / "local/all-MiniLM-L6-v2", litellm for anything else.

    `cache_dir` holds the local model's ONNX export (default: `default_model_cache_dir()`).
    Either loads on its first `embed`; `load_now` (called in a running event loop) starts loading the
    local model at once, in the loop's executor, for a caller that will embed soon and has other
    work to do meanwhile (a recall reaching its database).
    """
    if model in _LOCAL_ALIASES and api_base is None:
        local = LocalEmbedder(cache_dir)
        if load_now:
            local.load_in_background()
        return local
    return LiteLLMEmbedder(model, api_base, api_key, dimension, timeout, retry=retry)
