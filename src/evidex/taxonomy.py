"""Label taxonomies for the classify job: named labels with their definitions.

A label without a definition gives the judge nothing to decide by, so both are required. A
taxonomy comes from code (:meth:`Taxonomy.parse`) or from a YAML/JSON file
(:meth:`Taxonomy.from_file`), in any of three shapes::

    labels: [{name: SUPPORT, description: ...}, ...]     # a mapping with "labels"
    [{name: SUPPORT, description: ...}, ...]             # a bare list
    {SUPPORT: "...", CONTRADICT: "..."}                  # name → description

Bad input raises :class:`~evidex.errors.InputError` naming the file and, for syntax errors and a
label defined twice (which YAML and JSON would silently resolve to the last definition), the
line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from evidex.errors import InputError

__all__ = ["LabelDefinition", "Taxonomy"]


class LabelDefinition(BaseModel):
    """One label: the exact name the judge must answer with, and what it means."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(validation_alias=AliasChoices("name", "label"), min_length=1)
    description: str = Field(
        validation_alias=AliasChoices("description", "definition"), min_length=1
    )

    @model_validator(mode="after")
    def _not_blank(self) -> LabelDefinition:
        if self.name != self.name.strip() or not self.name.strip():
            raise ValueError(f"label name {self.name!r} must be non-empty, without outer spaces")
        if not self.description.strip():
            raise ValueError(f"label {self.name!r} has an empty description")
        return self


class Taxonomy(BaseModel):
    """The labels a classification may use, in the order they are shown to the judge."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    labels: tuple[LabelDefinition, ...]

    @model_validator(mode="after")
    def _consistent(self) -> Taxonomy:
        if not self.labels:
            raise ValueError("the taxonomy has no labels; at least one is required")
        names = [label.name for label in self.labels]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"label names must be unique; repeated: {', '.join(repeated)}")
        return self

    @property
    def names(self) -> list[str]:
        return [label.name for label in self.labels]

    def render(self) -> str:
        """The [LABELS] block of the prompt: one ``- NAME: description`` line per label."""
        return "\n".join(f"- {label.name}: {label.description.strip()}" for label in self.labels)

    @classmethod
    def parse(cls, data: Any, *, where: str | None = None) -> Taxonomy:
        """A taxonomy from any of the accepted shapes; ``where`` names the source in errors."""
        if isinstance(data, Taxonomy):
            return data
        if isinstance(data, Mapping) and "labels" not in data:
            data = {"labels": [{"name": k, "description": v} for k, v in data.items()]}
        elif isinstance(data, Sequence) and not isinstance(data, str):
            data = {"labels": list(data)}
        if not isinstance(data, Mapping):
            raise InputError(
                "a taxonomy is a list of {name, description}, a mapping with 'labels', or a "
                f"mapping of name to description; got {type(data).__name__}",
                where=where,
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"invalid taxonomy: {_explain(exc)}", where=where) from exc

    @classmethod
    def from_file(cls, path: str | Path) -> Taxonomy:
        """Read a taxonomy from YAML or JSON (by suffix; anything but ``.json`` is YAML)."""
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot read the taxonomy: {exc.strerror or exc}", where=str(path)
            ) from exc
        try:
            if path.suffix == ".json":
                data = json.loads(raw, object_pairs_hook=_unique_pairs)
            else:
                data = yaml.load(raw, Loader=_UniqueKeyLoader)  # a SafeLoader
        except _DuplicateKey as exc:
            at = exc.line if exc.line is not None else _json_line(raw, exc.key)
            raise InputError(
                f"{exc.key!r} is defined twice; a file keeps only one definition per key, "
                "so say which one you mean",
                where=f"{path}:{at}" if at else str(path),
            ) from exc
        except json.JSONDecodeError as exc:
            raise InputError(
                f"the taxonomy is not valid JSON: {exc.msg}", where=f"{path}:{exc.lineno}"
            ) from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise InputError(
                f"the taxonomy is not valid YAML: {problem}", where=f"{path}{line}"
            ) from exc
        if data is None:
            raise InputError(
                "the taxonomy file is empty; at least one label is required", where=str(path)
            )
        return cls.parse(data, where=str(path))


class _DuplicateKey(Exception):
    """A mapping in a taxonomy file names a key twice (YAML and JSON keep the last silently)."""

    def __init__(self, key: str, line: int | None = None) -> None:
        super().__init__(key)
        self.key, self.line = key, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a repeated key in a mapping, naming its line."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise _DuplicateKey(str(key), key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_line(raw: str, key: str) -> int | None:
    """The line of the second ``"key":`` in a JSON text (where the repeat is)."""
    found = list(re.finditer(rf"{re.escape(json.dumps(key))}\s*:", raw))
    return raw.count("\n", 0, found[1].start()) + 1 if len(found) > 1 else None


def _explain(exc: ValidationError) -> str:
    """Pydantic's errors as one line a person can act on (``labels.1.description: ...``)."""
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {message}" if loc else message)
    return "; ".join(parts)
