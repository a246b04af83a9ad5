"""The sufficiency evaluator: the judge's verdict and the policy's decision against gold labels.

Two things are measured on a golden set of questions with passages labelled sufficient or not
(CLAPnq's form, see :mod:`evidex.evaluate.golden`):

- the **verdict** (do the passages suffice?): F1 of ``insufficient`` (the class a pipeline
  acts on: it abstains) and accuracy, each with a bootstrap interval over questions, the
  confusion matrix and per-label agreement;
- the **decision** the policy makes of the verdict and its confidence: the share of questions
  abstained on, the share escalated to a person, and the share of *answerable* questions
  abstained on (``false_abstention_rate``: the harm of abstaining wrongly). The share of
  unanswerable questions answered anyway is reported beside them.

A fallback's verdict is insufficient at confidence 0, so its decision is ``escalate``; the
report counts fallbacks apart and warns about them. The policy is the job's default, or
``EvalOptions.extra["policy"]`` (a :class:`~evidex.jobs.sufficiency.SufficiencyPolicy` or its
fields) with ``extra["risk"]``; ``evidex calibrate sufficiency`` fits its
``abstain_confidence`` (:mod:`evidex.evaluate.calibrate_sufficiency`).

Golden rows, one question per line (CLAPnq's normalised form; ``query`` is taken for
``question``, ``answer`` is optional; :class:`~evidex.evaluate.golden.SufficiencyGolden`)::

    {"id": "q1", "question": "...", "passages": [{"passage_id": "p1", "title": "...",
     "text": "..."}], "sufficient": false, "answer": null}

A folder holding CLAPnq's ``sufficiency_dev.jsonl`` is read as that file.

Prediction rows (``predictions.jsonl``, and what ``--predictions`` reads)::

    {"id": "q1", "sufficient": false, "confidence": 0.9, "decision": "abstain",
     "supporting": [], "missing": ["the year"], "source": "judge"}

``id`` joins a row to its golden item; ``decision`` may be left out, and is then made from the
verdict by the policy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evidex.errors import InputError
from evidex.evaluate import metrics as m
from evidex.evaluate._base import GoldenEvaluator, Prediction, Scoring
from evidex.evaluate._util import confident_first, label_agreement, provenance, source_counts
from evidex.evaluate.golden import SufficiencyGolden, load_golden
from evidex.evaluate.layouts import Layout
from evidex.evaluate.plots import agreement_sections, fmt_interval, fmt_value, measure_table
from evidex.evaluate.registry import EvalOptions
from evidex.jobs.sufficiency import SufficiencyPolicy, asufficiency, decide
from evidex.tasks.sufficiency import SUFFICIENCY_TEMPLATE, SufficiencyValue
from evidex.types import RiskLevel

__all__ = [
    "LABELS",
    "SufficiencyEvaluator",
    "decision_figures",
    "decision_of",
    "policy_of",
    "risk_of",
]

JOB = "sufficiency"
LABELS = ("sufficient", "insufficient")
CLAPNQ_FILE = "sufficiency_dev.jsonl"
"""CLAPnq's normalised dev split (answerable and unanswerable questions, one passage each),
already in the golden format: a folder with it is read as that golden file."""
DECISIONS = ("answer", "abstain", "escalate")


def policy_of(options: EvalOptions) -> SufficiencyPolicy:
    """The policy an evaluation decides with: ``extra["policy"]``, else the job's default."""
    given = options.extra.get("policy")
    if given is None:
        return SufficiencyPolicy()
    return (
        given if isinstance(given, SufficiencyPolicy) else SufficiencyPolicy.model_validate(given)
    )


def risk_of(options: EvalOptions) -> RiskLevel:
    """The risk level an evaluation runs at: ``extra["risk"]``, else low."""
    return RiskLevel(str(options.extra.get("risk", RiskLevel.LOW.value)))


def _label(sufficient: bool) -> str:
    return LABELS[0] if sufficient else LABELS[1]


def _verdict(row: Mapping[str, Any]) -> tuple[bool, float]:
    sufficient, confidence = row.get("sufficient"), row.get("confidence")
    if not isinstance(sufficient, bool):
        raise InputError(f"the prediction for item {row.get('id')!r} needs 'sufficient': a bool")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        raise InputError(f"the prediction for item {row.get('id')!r} needs 'confidence': a number")
    return sufficient, float(confidence)


def decision_of(row: Mapping[str, Any], risk: RiskLevel, policy: SufficiencyPolicy) -> str:
    """What ``policy`` decides for a prediction row's verdict (the job's own :func:`decide`)."""
    sufficient, confidence = _verdict(row)
    value = SufficiencyValue(
        sufficient=sufficient,
        confidence=confidence,
        missing=[str(x) for x in row.get("missing") or []],
        source="fallback" if row.get("source") == "fallback" else "judge",
    )
    return decide(value, risk=risk, policy=policy).decision


def decision_figures(gold: Sequence[bool], decisions: Sequence[str]) -> dict[str, float]:
    """The decision's shares over questions whose gold label is ``gold`` (True: the passages
    suffice): abstained on, escalated, answerable ones abstained on (``nan`` when none is
    answerable), and unanswerable ones answered and abstained on (``nan`` when none is
    unanswerable)."""
    if len(gold) != len(decisions):
        raise ValueError("gold labels and decisions must be of equal length")
    answerable = [d for g, d in zip(gold, decisions, strict=True) if g]
    unanswerable = [d for g, d in zip(gold, decisions, strict=True) if not g]

    def share(values: Sequence[str], decision: str) -> float:
        return sum(v == decision for v in values) / len(values) if values else math.nan

    return {
        "abstention_rate": share(decisions, "abstain"),
        "escalation_rate": share(decisions, "escalate"),
        "false_abstention_rate": share(answerable, "abstain"),
        "insufficient_answered_rate": share(unanswerable, "answer"),
        "insufficient_abstained_rate": share(unanswerable, "abstain"),
    }


class SufficiencyEvaluator(GoldenEvaluator[SufficiencyGolden]):
    """Evaluator for the sufficiency job (see :mod:`evidex.evaluate.registry`)."""

    job = JOB
    what = "question"
    layouts = (
        Layout("CLAPnq", (CLAPNQ_FILE,), lambda root, extra: load_golden(root / CLAPNQ_FILE, JOB)),
    )

    @property
    def prompt_version(self) -> str:
        return SUFFICIENCY_TEMPLATE.version

    def load(self, path: Path, options: EvalOptions) -> list[SufficiencyGolden]:
        return load_golden(path, JOB)

    async def predict_one(self, record: SufficiencyGolden, run: Prediction) -> dict[str, Any]:
        result = await asufficiency(
            record.question,
            record.passages,
            judge=run.judge,
            store=run.store,
            settings=run.settings,
            risk=risk_of(run.options),
            policy=policy_of(run.options),
        )
        return {
            "id": record.id,
            "sufficient": result.sufficient,
            "confidence": result.confidence,
            "decision": result.decision.decision,
            "supporting": list(result.supporting_passage_ids),
            "missing": list(result.missing),
            **provenance(result),
        }

    # ------------------------------------------------------------------ scoring

    def measure(self, scoring: Scoring[SufficiencyGolden]) -> dict[str, Any]:
        records, aligned, options = scoring.records, scoring.rows, scoring.options
        risk, policy = risk_of(options), policy_of(options)
        gold = [_label(r.sufficient) for r in records]
        pred = [_label(_verdict(row)[0]) for row in aligned]
        decisions = [str(row.get("decision") or decision_of(row, risk, policy)) for row in aligned]
        unknown = sorted(set(decisions) - set(DECISIONS))
        if unknown:
            raise InputError(f"unknown decision(s) {unknown}; expected one of {list(DECISIONS)}")
        units = list(zip(gold, pred, decisions, strict=True))
        items = [
            {
                "key": r.id,
                "gold": g,
                "judgment": {"verdict": p, "decision": d},
                "why": {
                    "confidence": _verdict(row)[1],
                    "missing": [str(x) for x in row.get("missing") or []],
                },
                "score": float(g == p),
                "source": str(row.get("source", "unknown")),
            }
            for r, row, (g, p, d) in zip(records, aligned, units, strict=True)
        ]
        shown = ("f1(label=insufficient)", "accuracy", "false_abstention_rate")
        metrics, intervals = self.measured(items, {}, options, shown)
        shares = decision_figures([r.sufficient for r in records], decisions)
        by_gold = {label: dict(Counter(d for g, _, d in units if g == label)) for label in LABELS}
        sources, warnings = source_counts(aligned, "verdicts (insufficient, escalated)")
        return self.report(
            metrics,
            intervals,
            sources=sources,
            warnings=warnings,
            items=items,
            **label_agreement(gold, pred, LABELS),
            decisions={"by_gold": by_gold, **shares},
            policy=policy.model_dump(),
            risk=risk.value,
            worst=_worst(records, aligned, options.worst),
        )

    def figures(
        self, items: Sequence[Mapping[str, Any]], report: Mapping[str, Any]
    ) -> dict[str, float]:
        """F1 of insufficient and accuracy of the verdicts, and the decision's shares: all
        questions abstained on and escalated, answerable ones abstained on."""
        gold = [str(i["gold"]) for i in items]
        pred = [str(i["judgment"]["verdict"]) for i in items]
        shares = decision_figures(
            [g == LABELS[0] for g in gold], [str(i["judgment"]["decision"]) for i in items]
        )
        return {
            "f1(label=insufficient)": m.label_f1(gold, pred, LABELS[1]).f1,
            "accuracy": m.accuracy(gold, pred),
            "abstention_rate": shares["abstention_rate"],
            "false_abstention_rate": shares["false_abstention_rate"],
            "escalation_rate": shares["escalation_rate"],
        }

    # ------------------------------------------------------------------ rendering

    def markdown(self, report: Mapping[str, Any], out_dir: Path) -> str:
        met, ci = report["metrics"], report["intervals"]
        decisions = report["decisions"]
        lines = [
            "## Verdicts and decisions",
            "",
            f"F1 of insufficient **{fmt_value(met['f1(label=insufficient)'])}** (95% interval "
            f"{fmt_interval(ci['f1(label=insufficient)'])}), accuracy "
            f"**{fmt_value(met['accuracy'])}** ({fmt_interval(ci['accuracy'])}). Answerable "
            f"questions abstained on: **{fmt_value(met['false_abstention_rate'])}** "
            f"({fmt_interval(ci['false_abstention_rate'])}).",
            "",
            *measure_table(met),
            f"| unanswerable questions answered | "
            f"{fmt_value(decisions['insufficient_answered_rate'])} |",
            "",
            f"Policy (risk {report['risk']}): "
            + ", ".join(f"{k} {v}" for k, v in report["policy"].items())
            + f". Fallbacks: {report['fallbacks']}. Sources: "
            + ", ".join(f"{k} {v}" for k, v in report["sources"].items())
            + ".",
            "",
            "## Decisions by gold label",
            "",
            "| gold | answer | abstain | escalate |",
            "|---|---:|---:|---:|",
        ]
        for label in LABELS:
            counts = decisions["by_gold"].get(label, {})
            lines.append(
                f"| {label} | " + " | ".join(str(counts.get(d, 0)) for d in DECISIONS) + " |"
            )
        lines += agreement_sections(
            report,
            out_dir,
            "sufficiency: golden vs judge",
            "None: the judge agrees with every golden label.",
            _worst_line,
        )
        return "\n".join(lines)


def _worst(
    records: Sequence[SufficiencyGolden], aligned: Sequence[Mapping[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """Wrong verdicts, the most confident first (see :func:`confident_first`): a confident
    wrong verdict answers from passages that lack the answer, or abstains when they hold it."""
    off = []
    for record, row in zip(records, aligned, strict=True):
        sufficient, confidence = _verdict(row)
        if sufficient != record.sufficient:
            missing = "; ".join(str(x) for x in row.get("missing") or [])
            off.append(
                {
                    "id": record.id,
                    "golden": _label(record.sufficient),
                    "judge": _label(sufficient),
                    "confidence": confidence,
                    "missing": missing or "(none given)",
                    "source": str(row.get("source", "unknown")),
                    "input": record.question,
                }
            )
    return confident_first(off, limit)


def _worst_line(w: Mapping[str, Any]) -> str:
    return (
        f"- **{w['golden']} → {w['judge']}** (item `{w['id']}`, confidence "
        f"{fmt_value(w['confidence'])}, {w['source']}): missing {w['missing']}  \n"
        f"  question: {w['input']!r}"
    )
