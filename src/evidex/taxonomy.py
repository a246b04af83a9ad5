"""Label taxonomies for the classify job: named labels with their definitions.

A label without a definition gives the judge nothing to decide by, so both are required. A
taxonomy comes from code (:meth:`Taxonomy.parse`) or from a YAML/JSON file
(:meth:`Taxonomy.from_file`), in any of three shapes::

    labels: [{name: SUPPORT, description: ...}, ...]     # a mapping with "labels"
    [{name: SUPPORT, description: ...}, ...]             # a bare list
    {SUPPORT: "...", CONTRADICT: "..."}                  # name → description

Bad input raises :class:`~evidex.errors.InputError` naming the file and, for syntax errors, the
line.
"""

from __future__ import annotations

import json
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
            data = json.loads(raw) if path.suffix == ".json" else yaml.safe_load(raw)
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


def _explain(exc: ValidationError) -> str:
    """Pydantic's errors as one line a person can act on (``labels.1.description: ...``)."""
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {message}" if loc else message)
    return "; ".join(parts)
