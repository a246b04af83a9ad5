"""Golden sets: one JSONL format per job, and loaders for TREC qrels and runs.

One JSON object per line; blank lines are skipped; unknown fields are rejected so that a typo
is an error, not a silently ignored label. Formats (documented with examples in
``docs/evaluation.md``):

- **tier** – one query–passage pair per line::

      {"query_id": "q1", "query": "...", "passage_id": "p7", "text": "...", "tier": "irrelevant"}

  ``query_id`` is optional (the query text groups the pairs when it is missing); ``grade``
  may keep the original graded label for reference.
- **rerank** – one query per line, its candidates in retrieval order and graded judgments::

      {"query_id": "q1", "query": "...", "candidates": [{"passage_id": "p1", "text": "..."}],
       "grades": {"p1": 2, "p9": 0}}

- **classify** – one input per line, with the gold labels and the ids of the rationale
  passages::

      {"id": "c1", "input": "...", "passages": [{"passage_id": "...", "text": "..."}],
       "labels": ["SUPPORT"], "rationale_ids": ["d12:3"]}

- **audit** – one answer per line, with its gold claims::

      {"id": "a1", "answer": "...", "passages": [...],
       "claims": [{"claim_text": "...", "classification": "fully_supported",
                   "supporting_context_ids": ["s5"]}]}

A job that is not in :data:`GOLDEN_TYPES` reads the row model its definition's evaluation
names (``Evaluation.golden``), rows keyed by their ``id``; a file of such rows is told apart by
its first record validating as one.

Every error names the file and the line (``InputError.where``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from evidex.errors import InputError
from evidex.evaluate.layouts import layout_job
from evidex.types import DEFAULT_TIERS, Passage, TierScheme

__all__ = [
    "AUDIT_CLASSES",
    "GOLDEN_TYPES",
    "AuditClaim",
    "AuditGolden",
    "ClassifyGolden",
    "RerankGolden",
    "SufficiencyGolden",
    "TierGolden",
    "detect_job",
    "load_golden",
    "load_qrels",
    "load_run",
    "read_jsonl",
    "tiers_from_grades",
    "write_jsonl",
]

AUDIT_CLASSES = ("fully_supported", "partially_supported", "inferred", "unsupported")
"""The claim classes of the audit spec, the default labels of an audit golden set."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TierGolden(_Record):
    """One graded query–passage pair."""

    query_id: str | None = None
    query: str = Field(min_length=1)
    passage_id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    tier: str
    grade: int | None = None

    @field_validator("query_id", "passage_id", mode="before")
    @classmethod
    def _ids_are_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @property
    def group(self) -> str:
        """The query this pair belongs to: its id, else its text."""
        return self.query_id or self.query

    @property
    def key(self) -> str:
        return f"{self.group}\x1f{self.passage_id}"


class RerankGolden(_Record):
    """One query, its candidates in retrieval order, and graded judgments (unjudged = 0)."""

    query_id: str | None = None
    query: str = Field(min_length=1)
    candidates: list[Passage] = Field(min_length=1)
    grades: dict[str, int]

    @property
    def group(self) -> str:
        return self.query_id or self.query


class ClassifyGolden(_Record):
    """One input to classify, its evidence passages, gold labels and rationale passage ids."""

    id: str = Field(min_length=1)
    input: str = Field(min_length=1)
    passages: list[Passage]
    labels: list[str] = Field(min_length=1)
    rationale_ids: list[str] = Field(default_factory=list)


class AuditClaim(_Record):
    claim_text: str = Field(min_length=1)
    classification: str
    supporting_context_ids: list[str] = Field(default_factory=list)


class AuditGolden(_Record):
    """One answer, the context it was written from, and its gold claims."""

    id: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    passages: list[Passage]
    claims: list[AuditClaim] = Field(min_length=1)


class SufficiencyGolden(_Record):
    """One question, the passages given with it, and whether they suffice to answer it."""

    id: str = Field(min_length=1)
    question: str = Field(min_length=1, validation_alias=AliasChoices("question", "query"))
    passages: list[Passage] = Field(min_length=1)
    sufficient: bool
    answer: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_is_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @property
    def group(self) -> str:
        """The query this record belongs to (its words, case and spacing aside): a
        calibration leaves whole queries out, even one asked with several passage sets."""
        return " ".join(self.question.lower().split())


GOLDEN_TYPES: dict[str, type[_Record]] = {
    "tier": TierGolden,
    "rerank": RerankGolden,
    "classify": ClassifyGolden,
    "audit": AuditGolden,
}
_SIGNATURE = {"tier": "tier", "rerank": "candidates", "classify": "labels", "audit": "claims"}


def _registered_types() -> dict[str, type[BaseModel]]:
    """The golden row models of the registered jobs not in :data:`GOLDEN_TYPES`, read from
    their definitions (imported here: the jobs import no evaluation module)."""
    from evidex.jobs import definitions

    return {
        d.name: d.evaluation.golden_type()
        for d in definitions()
        if d.evaluation is not None and d.name not in GOLDEN_TYPES
    }


R = TypeVar("R", bound=BaseModel)


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; bad JSON names its line."""
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise InputError(f"not valid JSON: {exc}", where=f"{path}:{lineno}") from exc
            if not isinstance(value, dict):
                raise InputError("expected a JSON object per line", where=f"{path}:{lineno}")
            yield lineno, value


def write_jsonl(path: str | Path, records: Iterable[BaseModel | dict[str, Any]]) -> int:
    """Write records one per line (``None`` fields left out); returns how many."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as handle:
        for record in records:
            data = (
                record.model_dump(mode="json", exclude_none=True)
                if isinstance(record, BaseModel)
                else record
            )
            handle.write(json.dumps(data, ensure_ascii=False) + "\n")
            count += 1
    return count


def detect_job(path: str | Path) -> str:
    """Which job a golden file is for, from the fields of its first record (for a data set
    folder: from its layout, see :func:`evidex.evaluate.layouts.layout_job`)."""
    if Path(path).is_dir():
        job = layout_job(path)
        if job is None:
            raise InputError("not a known data set folder; name the job", where=str(path))
        return job
    for lineno, data in read_jsonl(path):
        for job, field_name in _SIGNATURE.items():
            if field_name in data:
                return job
        for job, model in _registered_types().items():
            try:
                model.model_validate(data)
            except ValidationError:
                continue
            return job
        raise InputError(
            "cannot tell which job this golden record is for (expected a 'tier', 'candidates', "
            "'labels' or 'claims' field, or a record of "
            f"{' / '.join(_registered_types()) or 'another job'})",
            where=f"{path}:{lineno}",
        )
    raise InputError("the golden set is empty", where=str(path))


def load_golden(path: str | Path, job: str, *, labels: Sequence[str] | None = None) -> list[Any]:
    """Read and validate a golden JSONL file for ``job``.

    ``labels`` are the allowed labels (tier names for tier, the taxonomy for classify, claim
    classes for audit); tier defaults to the default tier names. Duplicate items, unknown
    labels and an empty file are :class:`InputError` naming the file and line.
    """
    types: dict[str, type[BaseModel]] = {**GOLDEN_TYPES, **_registered_types()}
    if job not in types:
        raise InputError(f"no golden format for job {job!r}; jobs: {', '.join(types)}")
    if labels is None:
        labels = {"tier": DEFAULT_TIERS.names, "audit": list(AUDIT_CLASSES)}.get(job)
    model = types[job]
    records: list[Any] = []
    seen: dict[str, int] = {}
    for lineno, data in read_jsonl(path):
        where = f"{path}:{lineno}"
        try:
            record = model.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"not a {job} golden record: {_brief(exc)}", where=where) from exc
        for label in _labels_of(record):
            if labels is not None and label not in labels:
                raise InputError(
                    f"unknown label {label!r}; expected one of {list(labels)}", where=where
                )
        key = _key_of(record)
        if key in seen:
            raise InputError(
                f"duplicate item {key.replace(chr(31), ' / ')!r} (first on line {seen[key]})",
                where=where,
            )
        seen[key] = lineno
        records.append(record)
    if not records:
        raise InputError("the golden set is empty", where=str(path))
    return records


def tiers_from_grades(grade: int, scheme: TierScheme = DEFAULT_TIERS) -> str:
    """Map a TREC-style grade (0 = not relevant, higher = better) to a tier of ``scheme``:
    the highest grade is the top tier, grade 0 the bottom tier; grades beyond are clamped."""
    names = scheme.names
    return names[max(0, min(len(names) - 1, len(names) - 1 - grade))]


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels (``qid iteration docid grade``, whitespace separated) → {qid: {docid: grade}}."""
    qrels: dict[str, dict[str, int]] = {}
    for lineno, parts in _columns(path):
        if len(parts) != 4 or not parts[3].lstrip("-").isdigit():
            raise InputError(
                f"a qrels line has 4 columns 'qid 0 docid grade' with an integer grade, got "
                f"{' '.join(parts)!r}",
                where=f"{path}:{lineno}",
            )
        qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return qrels


def load_run(path: str | Path) -> dict[str, dict[str, float]]:
    """TREC run (``qid Q0 docid rank score tag``) → ``{qid: {docid: score}}``."""
    run: dict[str, dict[str, float]] = {}
    for lineno, parts in _columns(path):
        try:
            if len(parts) != 6:
                raise ValueError
            score = float(parts[4])
        except ValueError:
            raise InputError(
                f"a run line has 6 columns 'qid Q0 docid rank score tag', got {' '.join(parts)!r}",
                where=f"{path}:{lineno}",
            ) from None
        run.setdefault(parts[0], {})[parts[2]] = score
    return run


def _columns(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield lineno, line.split()


def _labels_of(record: BaseModel) -> list[str]:
    if isinstance(record, TierGolden):
        return [record.tier]
    if isinstance(record, ClassifyGolden):
        return list(record.labels)
    if isinstance(record, AuditGolden):
        return [c.classification for c in record.claims]
    return []


def _key_of(record: BaseModel) -> str:
    if isinstance(record, TierGolden):
        return record.key
    if isinstance(record, RerankGolden):
        return record.group
    return str(getattr(record, "id", ""))


def _brief(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'record'}: {err['msg']}" for err in exc.errors()
    )
