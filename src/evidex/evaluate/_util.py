"""Small helpers shared by the evaluation modules."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from evidex._text import sha256_hex
from evidex.errors import ConfigError, InputError
from evidex.evaluate import metrics as m
from evidex.evaluate.plots import excerpt

__all__ = [
    "align_rows",
    "interval_dict",
    "joint_version",
    "jsonable",
    "prf_dict",
    "provenance",
    "read_json_object",
    "source_counts",
]

R = TypeVar("R")
T = TypeVar("T")


def jsonable(value: Any) -> Any:
    """``value`` with every ``nan`` replaced by ``None``: JSON has no NaN, and an undefined
    figure (kappa on a single label) must read as undefined, not as a number."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def read_json_object(path: str | Path, what: str) -> dict[str, Any]:
    """A JSON object from ``path``; anything else is a :class:`ConfigError` naming ``what``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} holds a JSON object")
    return data


def align_rows(
    records: Sequence[R],
    rows: Sequence[Mapping[str, Any]],
    record_keys: Callable[[R], Sequence[str]],
    row_keys: Callable[[Mapping[str, Any]], Sequence[str]],
    what: str,
    label: Callable[[R], str] | None = None,
) -> list[Mapping[str, Any]]:
    """The prediction row of each golden record, in golden order.

    Records and rows may answer to several keys (an id, else the query text), tried in order;
    the first row for a key wins. Records without a row are an :class:`InputError` that counts
    them and names the first five (by ``label``, else their first key), so a predictions file
    made elsewhere is never scored on a silent subset.
    """
    index: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        for key in row_keys(row):
            index.setdefault(key, row)
    aligned: list[Mapping[str, Any]] = []
    missing: list[str] = []
    for record in records:
        keys = record_keys(record)
        found = next((index[k] for k in keys if k in index), None)
        if found is None:
            missing.append(label(record) if label else keys[0])
        else:
            aligned.append(found)
    if missing:
        raise InputError(
            f"{len(missing)} golden {what}(s) have no prediction: "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )
    return aligned


def interval_dict(interval: Any) -> dict[str, float | int]:
    """A bootstrap :class:`~evidex.evaluate.metrics.Interval` as report JSON (bounds only)."""
    return {
        "low": interval.low,
        "high": interval.high,
        "level": interval.level,
        "samples": interval.samples,
    }


def prf_dict(value: Any, *, support: bool = True) -> dict[str, float | int]:
    """A :class:`~evidex.evaluate.metrics.PRF` as report JSON: precision, recall, F1 and, with
    ``support``, how many gold items the label has."""
    data = {"precision": value.precision, "recall": value.recall, "f1": value.f1}
    return data | {"support": value.support} if support else data


def joint_version(*templates: Any) -> str:
    """One prompt version for an evaluator whose job uses several prompt templates: a short
    hash of their versions, so that an edit to any of them shows."""
    return sha256_hex("|".join(t.version for t in templates))[:16]


def label_agreement(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str], columns: Sequence[str] = ()
) -> dict[str, Any]:
    """A labelled report's agreement parts, as :func:`~evidex.evaluate.plots.agreement_sections`
    renders them: the labels, the confusion matrix (over ``columns``: the labels and any
    no-label column) and each label's precision, recall and F1."""
    columns = list(columns or labels)
    matrix = m.confusion_matrix(gold, pred, columns)
    per_label = m.per_label_agreement(gold, pred, columns)
    return {
        "labels": list(labels),
        "confusion": {"labels": columns, "matrix": matrix.tolist()},
        "per_label": {label: prf_dict(v) for label, v in per_label.items() if label in labels},
    }


def confident_first(misses: Sequence[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The disagreements of a labelled report, the most confident first (a confident wrong
    answer is the costly kind; one without a confidence comes last; ties keep input order),
    at most ``limit``. Each entry holds its ``confidence`` and the ``input`` it was given,
    which is shown as an excerpt (a report lists the item, it does not reprint it)."""

    def key(entry: Mapping[str, Any]) -> float:
        confidence = float(entry["confidence"])
        return 1.0 if math.isnan(confidence) else -confidence

    return [{**e, "input": excerpt(e["input"], 300)} for e in sorted(misses, key=key)[:limit]]


def source_counts(rows: Sequence[Mapping[str, Any]], what: str) -> tuple[dict[str, int], list[str]]:
    """Where the predictions came from (judge, cache, fallback) and, when some are fallbacks,
    the warning that says so: ``what`` names the fallback, e.g. "rankings ... (retrieval order
    kept)". A report must never pass a fallback off as the judge's opinion."""
    sources = Counter(str(row.get("source", "unknown")) for row in rows)
    warnings = []
    if sources.get("fallback"):
        warnings.append(
            f"{sources['fallback']} of {len(rows)} {what} are fallbacks, not the judge's"
        )
    return dict(sources), warnings


def provenance(result: Any) -> dict[str, Any]:
    """A prediction row's ``source`` of a job result, and its ``reason`` when it has one."""
    return {"source": result.source, **({"reason": result.reason} if result.reason else {})}
