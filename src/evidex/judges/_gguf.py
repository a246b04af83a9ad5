"""``local:gguf``: the user's own GGUF instruct model, run by the ``local:qwen`` machinery.

Everything but the file is :class:`~evidex.judges._qwen.LlamaJudge`'s: llama-cpp-python in
process, one model per file and configuration shared under a lock, the prompt in the chat
template the file carries in its metadata (``tokenizer.chat_template``), JSON-schema-constrained
replies, and ``mode=score`` for tier and pointwise rerank. The file is never fetched: ``path=``
must name a GGUF file on disk. It is checked before llama.cpp sees it (exists, is a file,
starts with the GGUF magic bytes), so a wrong path is a :class:`~evidex.errors.ConfigError` that
names it rather than a crash inside the runtime. The file's name and sha256 are in the model
version and the fingerprint, so another file (or the same name re-quantized) never reuses
cached judgments.
"""

from __future__ import annotations

import functools
from pathlib import Path

from evidex.errors import ConfigError
from evidex.judges._qwen import LlamaJudge, LlamaOptions
from evidex.judges._weights import file_sha256

__all__ = ["GGUF_MAGIC", "GGUFJudge", "GGUFOptions", "check_gguf"]

GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""


class GGUFOptions(LlamaOptions):
    """Options of ``local:gguf``: the file, and those of every llama.cpp judge."""

    path: Path
    """The GGUF file of an instruct model (with a chat template in its metadata)."""


def check_gguf(path: Path) -> Path:
    """``path`` resolved, when it is a readable file that starts with the GGUF magic bytes;
    else a :class:`ConfigError` that names it."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ConfigError(
            f"local:gguf: no file at {path}; path= names a GGUF model file on disk "
            "(weights are never downloaded)"
        )
    if path.is_dir():
        raise ConfigError(f"local:gguf: {path} is a directory; path= names one .gguf file")
    try:
        with path.open("rb") as f:
            head = f.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ConfigError(f"local:gguf: cannot read {path}: {exc}") from exc
    if head != GGUF_MAGIC:
        raise ConfigError(
            f"local:gguf: {path} is not a GGUF file (it starts with {head!r}, not {GGUF_MAGIC!r})"
        )
    return path.resolve()


@functools.lru_cache(maxsize=16)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    """A file's sha256, hashed once per process for each version of the file."""
    return file_sha256(path)


class GGUFJudge(LlamaJudge):
    """A GGUF instruct model from a file, for all four jobs."""

    def __init__(self, judge_id: str, options: GGUFOptions) -> None:
        self._path = check_gguf(options.path)
        super().__init__(judge_id, options)
        self.options: GGUFOptions

    spec = "local:gguf"
    options_model = GGUFOptions
    wrong_spec = "the GGUF judge answers to 'local:gguf', not {spec!r}"

    def model_path(self) -> Path:
        return check_gguf(self._path)

    def model_name(self) -> str:
        stat = self._path.stat()
        digest = _sha256(self._path, stat.st_size, stat.st_mtime_ns)
        return f"gguf:{self._path.name}@{digest[:12]}"
