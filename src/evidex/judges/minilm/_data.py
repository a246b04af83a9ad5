"""The files ``local:minilm`` ships as package data (``evidex/data/minilm/``), or the user's."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from evidex.errors import ConfigError


def _data_file(name: str) -> bytes:
    return (
        importlib.resources.files("evidex")
        .joinpath("data")
        .joinpath("minilm")
        .joinpath(name)
        .read_bytes()
    )


def read_data(path: Path | None, name: str) -> tuple[bytes, str]:
    """Bytes of an explicit file or of the packaged one, and where they came from."""
    if path is None:
        return _data_file(name), f"evidex/data/minilm/{name}"
    try:
        return Path(path).read_bytes(), str(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {name}: {exc}") from exc
