"""Reading user files into task types: few-shot example files for the tier and classify jobs,
and prompt files (your own wording of a job's prompt).

The tasks (:mod:`evidex.tasks`) are I/O-free; this is where a path becomes their typed input.
Each loader reads a JSON or YAML list, or JSONL (one record a line), validates every record
with the task's pydantic model, and words a failure for its own kind of file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from evidex.errors import ConfigError, InputError
from evidex.tasks.classify import ClassifyExample
from evidex.tasks.custom import Prompt
from evidex.tasks.tier import TierExample

__all__ = ["load_classify_examples", "load_examples", "load_prompt", "read_records"]


def read_records(path: Path) -> list[Any]:
    """The records of a few-shot examples file: a JSON or YAML list, or JSONL (one a line).

    Raises ``OSError``, ``ValueError`` or ``yaml.YAMLError``; the caller words the error for
    its own kind of file.
    """
    raw = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        data: Any = [json.loads(line) for line in raw.splitlines() if line.strip()]
    elif path.suffix == ".json":
        data = json.loads(raw)
    else:
        data = yaml.safe_load(raw)
    if not isinstance(data, list):
        raise ValueError("expected a list of examples")
    return data


def load_examples(path: str | Path) -> tuple[TierExample, ...]:
    """Tier few-shot examples from a JSON/YAML list or a JSONL file."""
    path = Path(path)
    try:
        return tuple(TierExample.model_validate(item) for item in read_records(path))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read tier examples: {exc}") from exc


def load_classify_examples(path: str | Path) -> tuple[ClassifyExample, ...]:
    """Classify few-shot examples from a JSON/YAML list or a JSONL file (one example a line)."""
    path = Path(path)
    try:
        return tuple(ClassifyExample.model_validate(item) for item in read_records(path))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read classify examples: {exc}", where=str(path)) from exc


_PROMPT_KEYS = frozenset({"system", "user"})


def load_prompt(path: str | Path) -> Prompt:
    """A prompt file: YAML (``.yaml``/``.yml``) with a ``user`` text and an optional ``system``
    text, or any other text file, whose whole text is the user message.

    Only the text is read here; which placeholders it may use depends on the step it replaces
    and is checked when the job is built (:func:`evidex.tasks.custom.custom_template`).
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the prompt file: {exc}") from exc
    if path.suffix not in (".yaml", ".yml"):
        if not raw.strip():
            raise ConfigError(f"{path}: the prompt file is empty")
        return Prompt(user=raw, origin=str(path))
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: the prompt file is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a YAML prompt file is a mapping with user (and system)")
    unknown = sorted(str(k) for k in set(data) - _PROMPT_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; a prompt file has user and system")
    user, system = data.get("user"), data.get("system") or ""
    if not isinstance(user, str) or not user.strip() or not isinstance(system, str):
        raise ConfigError(f"{path}: user must be a non-empty text (and system a text)")
    return Prompt(user=user, system=system, origin=str(path))
