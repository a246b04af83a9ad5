"""The onnxruntime pieces the encoder judges share (``local:minilm``, ``local:cross-encoder``).

One way to do each thing: import the runtime with an install hint, open a session the way
these judges run it (CPU, one onnxruntime thread per run, quiet logs), order texts by length
into batches padded only to their own longest text, and run the batches side by side on a
small thread pool. Measured on 2 cores with MiniLM, two single-threaded runs side by side did
the same work in half the time of one two-threaded run after another: the runs are small, and
splitting one across cores costs more in synchronisation than it gains.
"""

from __future__ import annotations

import concurrent.futures
import importlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from evidex.errors import ConfigError, MissingExtraError

__all__ = [
    "MissingDependencyError",
    "import_dependency",
    "length_chunks",
    "open_session",
    "run_chunks",
    "worker_pool",
]

T = TypeVar("T")


class MissingDependencyError(MissingExtraError):
    """A core dependency of an encoder judge is not importable (a broken install, not an
    extra)."""

    def __init__(self, module: str, package: str, exc: ImportError, judge: str) -> None:
        self.extra = ""
        Exception.__init__(
            self,
            f"the {judge} judge needs {module}, which cannot be imported ({exc}); it is a "
            f"core dependency of evidex: pip install '{package}' (or reinstall evidex)",
        )


def import_dependency(module: str, package: str, judge: str = "local:minilm") -> Any:
    """``module``, or :class:`MissingDependencyError` naming ``package`` to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module, package, exc, judge) from exc


def open_session(model_path: Path, what: str, judge: str) -> Any:
    """An onnxruntime CPU session on ``model_path``, one thread per run.

    A file onnxruntime cannot load (not ONNX, truncated, an operator it lacks) is a
    :class:`ConfigError` that names the file and says what it should be (``what``).
    """
    ort = import_dependency("onnxruntime", "onnxruntime>=1.17", judge)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise ConfigError(f"{model_path}: cannot load {what}: {exc}") from exc


def worker_pool(threads: int, name: str) -> concurrent.futures.ThreadPoolExecutor:
    """The pool whose workers run batches side by side (one onnxruntime thread each)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)


def length_chunks(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices of the items, sorted by length and cut into batches of ``batch_size``, so
    padding each batch to its own longest item wastes little."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def run_chunks(
    workers: concurrent.futures.ThreadPoolExecutor,
    chunks: list[list[int]],
    run: Callable[[list[int]], T],
) -> Iterable[T]:
    """``run`` over every chunk, in order; on the pool when there are two or more."""
    return map(run, chunks) if len(chunks) < 2 else workers.map(run, chunks)
