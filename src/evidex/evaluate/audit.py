"""The audit evaluator: the judge's claim grades against manually annotated claims.

The spec asks for periodic spot checks of the audit against manual annotation. Claims are
scored on WiCE's three classes (:data:`~evidex.evaluate.datasets.AUDIT_TO_WICE`: fully_supported
→ supported, partially_supported → partially_supported, inferred and unsupported →
not_supported), on both sides, so a golden set in the audit's four classes and one from WiCE
are read the same way.

Which claims are compared: an answer with one gold claim found in its text (WiCE: the claim is
the answer) is audited with that claim given to the job, so only the grading is measured. An
answer with several gold claims is audited whole: the job extracts its own claims, and each is
matched to at most one gold claim by the overlap of their spans in the answer
(:func:`~evidex.evaluate.metrics.match_claims`, intersection over union ≥ 0.5; a claim not
found word for word in the answer is compared by word overlap instead). ``extra["claims"]``
(``auto``, ``gold``, ``extract``) forces one way for every answer.

Reported: 3-way macro-F1, F1 of supported against the rest (the figure published for WiCE),
accuracy, each with a bootstrap interval over answers, over the matched claims; claim-level
F1 (a gold claim found and graded alike) and the matching alone; the confusion matrix (PNG and
table); the distribution of the audit's four classes and of its decisions; fallbacks; and the
worst disagreements with the judge's explanation.

Prediction rows (``predictions.jsonl``, and what ``--predictions`` reads)::

    {"id": "a1", "claims": [{"claim_text": "...", "classification": "inferred",
                             "start": 0, "end": 42}], "decision": "review", "source": "judge"}

``id`` joins a row to its golden answer; ``start``/``end`` are optional (the claim is then
looked up in the answer).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidex.errors import ConfigError, InputError
from evidex.evaluate import metrics as m
from evidex.evaluate._base import GoldenEvaluator, Prediction, Scoring
from evidex.evaluate._util import joint_version, prf_dict, provenance, source_counts
from evidex.evaluate.datasets import AUDIT_TO_WICE, WICE_LABELS, wice_audit
from evidex.evaluate.golden import AUDIT_CLASSES, AuditGolden, load_golden
from evidex.evaluate.layouts import Layout
from evidex.evaluate.plots import (
    confusion_section,
    excerpt,
    fmt_counts,
    fmt_interval,
    fmt_value,
    measure_table,
    worst_section,
)
from evidex.evaluate.registry import EvalOptions
from evidex.jobs.audit import aaudit
from evidex.tasks.audit import CLASSIFY_TEMPLATE, EXTRACT_TEMPLATE, ONE_PASS_TEMPLATE
from evidex.tasks.spans import find_span

__all__ = ["MIN_OVERLAP", "AuditEvaluator", "claim_overlaps", "to_three"]

MIN_OVERLAP = 0.5
"""Least span overlap (intersection over union) for a predicted claim to match a gold one."""
_WORD = re.compile(r"\w+")


def to_three(classification: str) -> str:
    """An audit claim class on WiCE's scale (an unknown one is an :class:`InputError`)."""
    if classification not in AUDIT_TO_WICE:
        raise InputError(
            f"unknown claim classification {classification!r}; expected one of "
            f"{list(AUDIT_CLASSES)}"
        )
    return AUDIT_TO_WICE[classification]


def claim_overlaps(
    answer: str, gold: Sequence[str], pred: Sequence[tuple[str, tuple[int, int] | None]]
) -> list[list[float]]:
    """The overlap of every gold claim with every predicted ``(text, span)``: span intersection
    over union when both are located in ``answer``, else the Jaccard index of their words."""
    gold_spans = [find_span(answer, text) for text in gold]
    pred_spans = [span or find_span(answer, text) for text, span in pred]
    out = []
    for g_text, g_span in zip(gold, gold_spans, strict=True):
        row = []
        for (p_text, _), p_span in zip(pred, pred_spans, strict=True):
            if g_span is not None and p_span is not None:
                row.append(m.span_overlap(g_span, p_span))
            else:
                row.append(_word_jaccard(g_text, p_text))
        out.append(row)
    return out


def _word_jaccard(a: str, b: str) -> float:
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def _claims_mode(record: AuditGolden, options: EvalOptions) -> str:
    mode = str(options.extra.get("claims") or "auto")
    if mode not in ("auto", "gold", "extract"):
        raise ConfigError(f"the audit claims option is auto, gold or extract, got {mode!r}")
    if mode != "auto":
        return mode
    one = len(record.claims) == 1 and find_span(record.answer, record.claims[0].claim_text)
    return "gold" if one else "extract"


def _pred_claims(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    claims = row.get("claims")
    if not isinstance(claims, list) or not all(
        isinstance(c, dict) and isinstance(c.get("claim_text"), str) for c in claims
    ):
        raise InputError(
            f"the prediction for answer {row.get('id')!r} needs 'claims': a list of objects "
            "with claim_text and classification"
        )
    return claims


def _span(claim: Mapping[str, Any]) -> tuple[int, int] | None:
    start, end = claim.get("start"), claim.get("end")
    return (start, end) if isinstance(start, int) and isinstance(end, int) else None


class AuditEvaluator(GoldenEvaluator[AuditGolden]):
    """Evaluator for the audit job (see :mod:`evidex.evaluate.registry`)."""

    job = "audit"
    what = "answer"
    layouts = (Layout("WiCE", ("oracle_chunks/dev.jsonl",), lambda root, extra: wice_audit(root)),)

    @property
    def prompt_version(self) -> str:
        """The classification prompt's version (the pass every audited claim goes through),
        joined with the one-pass and extraction prompts' so an edit to any shows."""
        return joint_version(CLASSIFY_TEMPLATE, ONE_PASS_TEMPLATE, EXTRACT_TEMPLATE)

    def load(self, path: Path, options: EvalOptions) -> list[AuditGolden]:
        return load_golden(path, "audit", labels=AUDIT_CLASSES)

    async def predict_one(self, record: AuditGolden, run: Prediction) -> dict[str, Any]:
        mode = _claims_mode(record, run.options)
        result = await aaudit(
            record.answer,
            record.passages,
            answer_id=record.id,
            claims=[c.claim_text for c in record.claims] if mode == "gold" else None,
            judge=run.judge,
            store=run.store,
            settings=run.settings,
        )
        claims = [
            {
                "claim_text": c.claim_text,
                "start": c.start,
                "end": c.end,
                "classification": c.classification,
                "supporting_context_ids": c.supporting_context_ids,
                "explanation": c.explanation,
                "source": c.source,
            }
            for c in result.claims
        ]
        return {
            "id": record.id,
            "claims_from": mode,
            "claims": claims,
            "decision": result.decision.decision,
            **provenance(result),
        }

    # ------------------------------------------------------------------ scoring

    def measure(self, scoring: Scoring[AuditGolden]) -> dict[str, Any]:
        records, aligned, options = scoring.records, scoring.rows, scoring.options
        items: list[dict[str, Any]] = []
        worst: list[dict[str, Any]] = []
        levels: Counter[str] = Counter()
        for record, row in zip(records, aligned, strict=True):
            pred = _pred_claims(row)
            overlaps = claim_overlaps(
                record.answer,
                [c.claim_text for c in record.claims],
                [(str(c["claim_text"]), _span(c)) for c in pred],
            )
            pairs = []
            for gi, pi in m.match_claims(overlaps, MIN_OVERLAP):
                gold_claim, claim = record.claims[gi], pred[pi]
                pair = (to_three(gold_claim.classification), to_three(str(claim["classification"])))
                pairs.append(pair)
                if pair[0] != pair[1]:
                    worst.append(_disagreement(record, row, gold_claim.claim_text, claim, pair))
            levels.update(str(c["classification"]) for c in pred)
            counts = {
                "gold": len(record.claims),
                "audited": len(pred),
                "matched": len(pairs),
                "agree": sum(g == j for g, j in pairs),
            }
            items.append(
                {
                    "key": record.id,
                    "gold": [[c.claim_text, c.classification] for c in record.claims],
                    "judgment": {
                        "decision": str(row.get("decision", "unknown")),
                        "claims": [[str(c["claim_text"]), str(c["classification"])] for c in pred],
                    },
                    "why": [str(c.get("explanation") or "") for c in pred],
                    "score": m.prf(counts["agree"], counts["audited"], counts["gold"]).f1,
                    "source": str(row.get("source", "unknown")),
                    "pairs": [list(pair) for pair in pairs],
                    "counts": counts,
                }
            )
        metrics, intervals = self.measured(
            items, {}, options, ("macro_f1", "f1(label=supported)", "accuracy")
        )
        n_gold, n_pred, n_matched, n_agree = (
            sum(i["counts"][k] for i in items) for k in ("gold", "audited", "matched", "agree")
        )
        graded = m.prf(n_agree, n_pred, n_gold)
        matching = m.prf(n_matched, n_pred, n_gold)
        labels = list(WICE_LABELS)
        flat = [(g, j) for i in items for g, j in i["pairs"]]
        matrix = m.confusion_matrix([g for g, _ in flat], [j for _, j in flat], labels)
        sources, warnings = source_counts(aligned, "audits (sent to review, claims unsupported)")
        if n_matched < n_gold:
            warnings.append(
                f"{n_gold - n_matched} of {n_gold} gold claims matched no audited claim: they "
                "count in claim_f1 but not in the 3-way figures"
            )
        worst.sort(key=lambda w: (-w["distance"], w["id"]))
        return self.report(
            metrics,
            intervals,
            sources=sources,
            warnings=warnings,
            items=items,
            labels=labels,
            claims={
                "gold": n_gold,
                "audited": n_pred,
                "matched": n_matched,
                "agree": n_agree,
                "claim": prf_dict(graded, support=False),
                "matching": prf_dict(matching, support=False),
            },
            confusion={"labels": labels, "matrix": matrix.tolist()},
            levels={level: levels.get(level, 0) for level in AUDIT_CLASSES},
            decisions=dict(Counter(str(row.get("decision", "unknown")) for row in aligned)),
            claims_from=dict(Counter(str(row.get("claims_from", "unknown")) for row in aligned)),
            worst=worst[: options.worst],
        )

    def figures(
        self, items: Sequence[Mapping[str, Any]], report: Mapping[str, Any]
    ) -> dict[str, float]:
        """Over the matched claims of the answers, pooled: 3-way macro-F1, F1 of supported
        against the rest and accuracy; and claim-level F1 from the answers' claim counts."""
        pairs = [(str(g), str(j)) for i in items for g, j in i["pairs"]]
        labels = list(WICE_LABELS)
        agree, audited, gold = (
            sum(int(i["counts"][k]) for i in items) for k in ("agree", "audited", "gold")
        )
        return {
            "macro_f1": _or_nan(pairs, lambda g, j: m.macro_f1(g, j, labels)),
            "f1(label=supported)": _or_nan(pairs, lambda g, j: m.label_f1(g, j, "supported").f1),
            "accuracy": _or_nan(pairs, m.accuracy),
            "claim_f1": m.prf(agree, audited, gold).f1,
        }

    # ------------------------------------------------------------------ rendering

    def markdown(self, report: Mapping[str, Any], out_dir: Path) -> str:
        met, ci, c = report["metrics"], report["intervals"], report["claims"]
        lines = [
            "## Claim support",
            "",
            f"On WiCE's three classes, over {c['matched']} matched claims: macro-F1 "
            f"**{fmt_value(met['macro_f1'])}** (95% interval {fmt_interval(ci['macro_f1'])}), "
            f"supported vs the rest F1 **{fmt_value(met['f1(label=supported)'])}** "
            f"({fmt_interval(ci['f1(label=supported)'])}), accuracy "
            f"{fmt_value(met['accuracy'])} ({fmt_interval(ci['accuracy'])}).",
            "",
            *measure_table(met),
            "",
            f"Claims: {c['gold']} gold, {c['audited']} audited, {c['matched']} matched, "
            f"{c['agree']} graded alike. Claim-level precision "
            f"{fmt_value(c['claim']['precision'])}, recall {fmt_value(c['claim']['recall'])}; "
            f"matching alone (grade ignored) F1 {fmt_value(c['matching']['f1'])}. Claims came "
            f"from: {fmt_counts(report['claims_from'])}.",
            "",
            f"The audit's classes: {fmt_counts(report['levels'])}. Decisions: "
            f"{fmt_counts(report['decisions'])}. Fallbacks: {report['fallbacks']}.",
            "",
            "## Confusion matrix",
            "",
        ]
        matrix = np.array(report["confusion"]["matrix"], dtype=np.int64)
        lines += confusion_section(matrix, report["labels"], out_dir, "audit: golden vs judge")
        lines += worst_section(
            report["worst"],
            "None: every matched claim is graded as the golden set grades it.",
            _worst_line,
        )
        return "\n".join(lines)


def _or_nan(pairs: Sequence[tuple[str, str]], f: Any) -> float:
    if not pairs:
        return math.nan
    return float(f([g for g, _ in pairs], [j for _, j in pairs]))


def _disagreement(
    record: AuditGolden,
    row: Mapping[str, Any],
    gold_text: str,
    claim: Mapping[str, Any],
    pair: tuple[str, str],
) -> dict[str, Any]:
    return {
        "id": record.id,
        "claim": excerpt(gold_text, 300),
        "golden": pair[0],
        "judge": pair[1],
        "classification": str(claim["classification"]),
        "distance": abs(WICE_LABELS.index(pair[0]) - WICE_LABELS.index(pair[1])),
        "explanation": str(claim.get("explanation") or "(none given)"),
        "source": str(claim.get("source") or row.get("source", "unknown")),
    }


def _worst_line(w: Mapping[str, Any]) -> str:
    return (
        f"- **{w['golden']} → {w['judge']}** ({w['classification']}; answer `{w['id']}`, "
        f"{w['source']}): {w['explanation']}  \n  claim: {w['claim']!r}"
    )
