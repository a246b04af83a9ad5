"""The classify evaluator: the judge's cited labels against gold labels and rationale passages.

The spec asks for two things on a golden set: classification accuracy and citation
correctness. The report gives accuracy (the predicted label set equals the gold set) and
macro-F1 over the taxonomy, each with a bootstrap interval over items; per-label agreement and
the confusion matrix (PNG and table); citation precision and recall of the cited passages
against the gold rationale passages (micro and macro); the share of quotes in the judge's raw
replies that are word for word in the passage they name (measured before validation, which
would otherwise reject them); and the fallbacks.

Taxonomy: ``EvalOptions.extra["taxonomy"]`` (``evidex eval classify --labels FILE``), else
SciFact's when the golden labels are SciFact's (with its prompt constraints), else an error
asking for one: a judge cannot classify by label names alone. An answer without labels
(``unclassifiable``, or a fallback) counts as the taxonomy's abstain label when it has one
(SciFact: ``NOT_ENOUGH_INFO``; ``extra["abstain_label"]`` otherwise), else as no label. Cited
passages are the supporting evidence of every predicted label but the abstain label.

Prediction rows (``predictions.jsonl``, and what ``--predictions`` reads)::

    {"id": "c1", "labels": ["SUPPORT"], "cited": ["d12:3"], "source": "judge"}

``id`` joins a row to its golden item.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evidex._text import contains_verbatim, extract_json_object
from evidex.errors import ConfigError, InputError
from evidex.evaluate import metrics as m
from evidex.evaluate._base import GoldenEvaluator, Prediction, Scoring
from evidex.evaluate._util import confident_first, label_agreement, provenance, source_counts
from evidex.evaluate.datasets import (
    SCIFACT_CONSTRAINTS,
    SCIFACT_LABELS,
    SCIFACT_TAXONOMY,
    scifact_classify,
)
from evidex.evaluate.golden import ClassifyGolden, load_golden
from evidex.evaluate.layouts import Layout
from evidex.evaluate.plots import agreement_sections, fmt_interval, fmt_value, measure_table
from evidex.evaluate.registry import EvalOptions
from evidex.jobs.classify import ClassifyResult, aclassify
from evidex.tasks.classify import CLASSIFY_TEMPLATE
from evidex.taxonomy import Taxonomy

__all__ = [
    "NO_LABEL",
    "ClassifyEvaluator",
    "cited_passages",
    "predicted_labels",
    "raw_quote_counts",
]

NO_LABEL = "(none)"
"""The confusion-matrix column of answers without a label (when there is no abstain label)."""


def _taxonomy(labels: Sequence[str], options: EvalOptions) -> tuple[Taxonomy | None, bool]:
    """The taxonomy to classify with (None: not known) and whether it is SciFact's."""
    given = options.extra.get("taxonomy")
    if given is not None:
        return Taxonomy.parse(given), False
    if labels and set(labels) <= set(SCIFACT_LABELS):
        return SCIFACT_TAXONOMY, True
    return None, False


def _abstain(taxonomy: Taxonomy | None, options: EvalOptions) -> str | None:
    label = options.extra.get("abstain_label")
    if label is not None:
        return str(label)
    if taxonomy is not None and "NOT_ENOUGH_INFO" in taxonomy.names:
        return "NOT_ENOUGH_INFO"
    return None


def predicted_labels(result: ClassifyResult, abstain: str | None) -> list[str]:
    """The labels to score: the assigned ones, or ``[abstain]`` for an answer without any."""
    if result.labels and not result.unclassifiable:
        return list(result.labels)
    return [abstain] if abstain else []


def cited_passages(result: ClassifyResult, abstain: str | None) -> list[str]:
    """Passages cited as support for a label other than the abstain label, in citation order."""
    seen: dict[str, None] = {}
    for assignment in result.classifications:
        if assignment.label != abstain:
            for evidence in assignment.supporting_evidence:
                seen.setdefault(evidence.passage_id, None)
    return list(seen)


def raw_quote_counts(
    rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str]
) -> tuple[int, int]:
    """``(verbatim, total)`` quotes in the raw replies of audit-log rows, before validation:
    a quote counts as verbatim when it occurs, after whitespace normalisation, in the passage
    it names."""
    verbatim = total = 0
    for row in rows:
        if row.get("status") not in ("ok", "invalid") or not row.get("raw_output"):
            continue
        try:
            data = extract_json_object(str(row["raw_output"]))
        except ValueError:
            continue
        items = data.get("classifications") if isinstance(data, dict) else None
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            for key in ("supporting_evidence", "counter_evidence"):
                quotes = item.get(key)
                for quote in quotes if isinstance(quotes, list) else []:
                    if not isinstance(quote, dict):
                        continue
                    total += 1
                    text = texts.get(str(quote.get("passage_id")))
                    q = quote.get("quoted_text")
                    verbatim += bool(text and isinstance(q, str) and contains_verbatim(text, q))
    return verbatim, total


def _label_list(row: Mapping[str, Any]) -> list[str]:
    labels = row.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise InputError(f"the prediction for item {row.get('id')!r} needs 'labels': a list")
    return labels


class ClassifyEvaluator(GoldenEvaluator[ClassifyGolden]):
    """Evaluator for the classify job (see :mod:`evidex.evaluate.registry`)."""

    job = "classify"
    layouts = (
        Layout(
            "SciFact",
            ("claims_train.jsonl", "corpus.jsonl"),
            lambda root, extra: scifact_classify(root),
        ),
    )

    @property
    def prompt_version(self) -> str:
        return CLASSIFY_TEMPLATE.version

    def load(self, path: Path, options: EvalOptions) -> list[ClassifyGolden]:
        given = options.extra.get("taxonomy")
        names = Taxonomy.parse(given).names if given is not None else None
        return load_golden(path, "classify", labels=names)

    async def predict_one(self, record: ClassifyGolden, run: Prediction) -> dict[str, Any]:
        taxonomy, scifact = _taxonomy(record.labels, run.options)
        if taxonomy is None:
            raise ConfigError(
                "the golden labels are not SciFact's, and a judge cannot classify by label "
                "names alone: give the taxonomy with its definitions (--labels FILE)"
            )
        abstain = _abstain(taxonomy, run.options)
        result = await aclassify(
            record.input,
            record.passages,
            taxonomy,
            judge=run.judge,
            store=run.store,
            settings=run.settings,
            multi_label=bool(run.options.extra.get("multi_label", False)),
            constraints=SCIFACT_CONSTRAINTS if scifact else None,
        )
        row: dict[str, Any] = {
            "id": record.id,
            "labels": predicted_labels(result, abstain),
            "cited": cited_passages(result, abstain),
            "confidence": {a.label: a.confidence for a in result.classifications},
            "rationale": _rationale(result),
            **provenance(result),
        }
        audit_rows = getattr(run.store, "audit_rows", None)
        if callable(audit_rows):
            texts = {p.passage_id: p.text for p in record.passages}
            verbatim, total = raw_quote_counts(
                audit_rows(run_id=result.run_id, job=self.job), texts
            )
            row["quotes"] = {"verbatim": verbatim, "total": total}
        return row

    # ------------------------------------------------------------------ scoring

    def measure(self, scoring: Scoring[ClassifyGolden]) -> dict[str, Any]:
        records, aligned, options = scoring.records, scoring.rows, scoring.options
        gold_labels = [x for r in records for x in r.labels]
        taxonomy, _ = _taxonomy(gold_labels, options)
        names = taxonomy.names if taxonomy else sorted(set(gold_labels))
        pred = [_label_list(row) for row in aligned]
        for row, labels in zip(aligned, pred, strict=True):
            unknown = [x for x in labels if x not in names]
            if unknown:
                raise InputError(
                    f"the prediction for item {row.get('id')!r} has label(s) {unknown}, not "
                    f"among {names}"
                )
        gold_sets = [frozenset(r.labels) for r in records]
        items: list[dict[str, Any]] = [
            {
                "key": r.id,
                "gold": {"labels": sorted(r.labels), "cited": sorted(r.rationale_ids)},
                "judgment": {
                    "labels": sorted(labels),
                    "cited": sorted(str(x) for x in row.get("cited") or []),
                },
                "why": str(row.get("rationale") or ""),
                "score": float(set(labels) == set(r.labels)),
                "source": str(row.get("source", "unknown")),
                "quotes": {
                    "verbatim": int((row.get("quotes") or {}).get("verbatim", 0)),
                    "total": int((row.get("quotes") or {}).get("total", 0)),
                },
            }
            for r, row, labels in zip(records, aligned, pred, strict=True)
        ]
        metrics, intervals = self.measured(
            items, {"labels": names}, options, ("accuracy", "macro_f1")
        )
        verbatim = sum(i["quotes"]["verbatim"] for i in items)
        quotes = sum(i["quotes"]["total"] for i in items)
        single = [i for i, g in enumerate(gold_sets) if len(g) == 1]
        gold1 = [next(iter(gold_sets[i])) for i in single]
        pred1 = [pred[i][0] if pred[i] else NO_LABEL for i in single]
        columns = names + ([NO_LABEL] if NO_LABEL in pred1 else [])
        sources, warnings = source_counts(aligned, "answers (unclassifiable)")
        if len(single) < len(records):
            warnings.append(
                f"{len(records) - len(single)} golden item(s) have several labels: they count "
                "in accuracy and macro-F1 but not in the confusion matrix"
            )
        return self.report(
            metrics,
            intervals,
            sources=sources,
            warnings=warnings,
            items=items,
            **label_agreement(gold1, pred1, names, columns),
            quotes={"verbatim": verbatim, "total": quotes},
            predicted=dict(Counter(x for p in pred for x in p)),
            worst=_worst(records, aligned, options.worst),
        )

    def figures(
        self, items: Sequence[Mapping[str, Any]], report: Mapping[str, Any]
    ) -> dict[str, float]:
        """Accuracy and macro-F1 of the label sets over the report's labels, citation
        precision and recall (micro and macro) against the rationale passages, and the share
        of quotes found word for word."""
        gold = [frozenset(i["gold"]["labels"]) for i in items]
        pred = [frozenset(i["judgment"]["labels"]) for i in items]
        citations = m.citation_scores(
            [frozenset(i["gold"]["cited"]) for i in items],
            [frozenset(i["judgment"]["cited"]) for i in items],
        )
        verbatim = sum(int(i["quotes"]["verbatim"]) for i in items)
        quotes = sum(int(i["quotes"]["total"]) for i in items)
        return {
            "accuracy": m.set_accuracy(gold, pred),
            "macro_f1": m.set_macro_f1(gold, pred, list(report["labels"])),
            "citation_precision": citations["precision_micro"],
            "citation_recall": citations["recall_micro"],
            "citation_precision(avg=macro)": citations["precision_macro"],
            "citation_recall(avg=macro)": citations["recall_macro"],
            "verbatim_share": verbatim / quotes if quotes else math.nan,
        }

    # ------------------------------------------------------------------ rendering

    def markdown(self, report: Mapping[str, Any], out_dir: Path) -> str:
        met, ci = report["metrics"], report["intervals"]
        q = report["quotes"]
        lines = [
            "## Labels and citations",
            "",
            f"Accuracy **{fmt_value(met['accuracy'])}** (95% interval "
            f"{fmt_interval(ci['accuracy'])}), macro-F1 **{fmt_value(met['macro_f1'])}** "
            f"({fmt_interval(ci['macro_f1'])}) over {', '.join(report['labels'])}.",
            "",
            *measure_table(met),
            "",
            f"Quotes in the raw replies found word for word in the passage they name: "
            f"{q['verbatim']} of {q['total']} (judge calls made by this run; cached answers "
            f"add none). Fallbacks: {report['fallbacks']}. Sources: "
            f"{', '.join(f'{k} {v}' for k, v in report['sources'].items())}.",
        ]
        lines += agreement_sections(
            report,
            out_dir,
            "classify: golden vs judge",
            "None: the judge agrees with every golden label set.",
            _worst_line,
        )
        return "\n".join(lines)


def _rationale(result: ClassifyResult) -> str:
    """What the judge gave as its reason: the first evidence rationale and quote of its first
    label, or why it found the input unclassifiable."""
    for assignment in result.classifications:
        for evidence in assignment.supporting_evidence:
            return f"{evidence.rationale} (quotes {evidence.passage_id}: {evidence.quoted_text!r})"
    return result.unclassifiable_reason or result.reason or "(none given)"


def _worst(
    records: Sequence[ClassifyGolden], aligned: Sequence[Mapping[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """Disagreements, the most confident first (see :func:`confident_first`)."""
    off = []
    for record, row in zip(records, aligned, strict=True):
        labels = _label_list(row)
        if set(labels) != set(record.labels):
            confidence = row.get("confidence") or {}
            off.append(
                {
                    "id": record.id,
                    "golden": list(record.labels),
                    "judge": labels,
                    "confidence": max((float(v) for v in confidence.values()), default=math.nan),
                    "rationale": str(row.get("rationale") or "(none given)"),
                    "source": str(row.get("source", "unknown")),
                    "input": record.input,
                }
            )
    return confident_first(off, limit)


def _worst_line(w: Mapping[str, Any]) -> str:
    return (
        f"- **{', '.join(w['golden'])} → {', '.join(w['judge']) or NO_LABEL}** "
        f"(item `{w['id']}`, confidence {fmt_value(w['confidence'])}, {w['source']}): "
        f"{w['rationale']}  \n  input: {w['input']!r}"
    )
