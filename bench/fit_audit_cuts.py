"""Fit the scoring auditor's cut points (``Cuts``) on the tune split of WiCE dev.

    python bench/fit_audit_cuts.py [--data ../shared/data] [--grades GRADES.jsonl]

Each tune claim is graded once by ``local:qwen`` in scoring mode, exactly as the audit job
grades it (the encoder's candidate sentences, the two Yes/No questions of ``model_grade``); the
probabilities go to ``--grades`` (JSON lines, one per claim, reused and extended on the next
run). Then the real :class:`~evidex.judges._qwen_audit.AuditScorer` replays them under every
grid point, so what is fitted is the grade the job would give, downgrades by code included.

Chosen: the ``supported`` and ``coverage`` cuts of best supported-vs-rest F1 (the figure
published for WiCE), ties broken by the higher cuts; then the ``partial`` cut of best 3-way
macro-F1 under them. Only the tune split is read (``bench/audit_wice.py --split report``
reports on the rest). Nothing is written to the docs: the chosen cuts become the ``Cuts``
defaults by hand, with this command in their docstring.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit_wice import ROOT, TO_WICE, claim_passages, load_claims
from audit_wice import in_split as wice_split
from evidex.evaluate.datasets import WICE_LABELS
from evidex.evaluate.metrics import label_f1, macro_f1
from evidex.judges._claim_evidence import Evidence, EvidencePicker
from evidex.judges._qwen_audit import AuditScorer, Cuts, model_grade
from evidex.judging import PassageText

GRID = [round(0.05 * i, 2) for i in range(21)]


def pick_evidence(items: Sequence[dict[str, Any]]) -> dict[str, list[Evidence]]:
    """Each claim's candidate sentences, picked by the encoder as the audit job picks them."""
    from evidex.judges.minilm import MiniLMJudge

    embed = MiniLMJudge().embed
    return {
        it["id"]: EvidencePicker(PassageText.of(claim_passages(it)), embed).pick(it["claim"])
        for it in items
    }


def grade_claims(
    items: Sequence[Mapping[str, Any]], picks: Mapping[str, list[Evidence]], path: Path
) -> dict[str, Mapping[str, float]]:
    """Each claim's class probabilities on its ``picks``, from ``path`` or graded now (and
    added to it)."""
    known: dict[str, Mapping[str, float]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            known[row["id"]] = row["probs"]
    missing = [it for it in items if it["id"] not in known]
    if missing:
        from evidex.judges import get_judge

        judge: Any = get_judge("local:qwen", mode="score", n_ctx=8192)
        grade = model_grade(judge.class_probabilities)
        with path.open("a", encoding="utf-8") as out:
            for index, item in enumerate(missing, 1):
                probs = grade(item["claim"], picks[item["id"]])
                known[item["id"]] = probs
                out.write(json.dumps({"id": item["id"], "probs": probs}) + "\n")
                out.flush()
                print(f"[{index}/{len(missing)}] {item['id']} {probs}", flush=True)
    return known


def levels(
    items: Sequence[Mapping[str, Any]],
    picks: Mapping[str, list[Evidence]],
    probs: Mapping[str, Mapping[str, float]],
    cuts: Cuts,
) -> list[str]:
    """The WiCE label the audit job would give each claim under ``cuts``."""
    out = []
    for item in items:
        scorer = AuditScorer(_replay(probs[item["id"]]), _no_embed, cuts=cuts, name="fit")
        graded = scorer.graded(item["claim"], picks[item["id"]])
        out.append(TO_WICE[graded["classification"]])
    return out


def _replay(known: Mapping[str, float]) -> Any:
    """A grade function that answers the probabilities the model gave this claim."""
    return lambda claim, evidence: known


def _no_embed(texts: Sequence[str]) -> Any:
    raise AssertionError("the candidates are picked before fitting")


def fit(
    items: Sequence[Mapping[str, Any]],
    picks: Mapping[str, list[Evidence]],
    probs: Mapping[str, Mapping[str, float]],
) -> tuple[Cuts, float, float]:
    """The chosen cuts, their supported-vs-rest F1 and their macro-F1 on ``items``."""
    gold = [it["label"] for it in items]

    def binary(cuts: Cuts) -> float:
        return label_f1(gold, levels(items, picks, probs, cuts), "supported").f1

    scored = [
        (binary(Cuts(supported=s, coverage=c)), s, c) for s, c in itertools.product(GRID, GRID)
    ]
    best_f1, supported, coverage = max(scored)
    partials = [round(0.5 + 0.02 * i, 2) for i in range(25)]
    macro, partial = max(
        (
            macro_f1(
                gold,
                levels(
                    items, picks, probs, Cuts(supported=supported, partial=p, coverage=coverage)
                ),
                WICE_LABELS,
            ),
            p,
        )
        for p in partials
    )
    return Cuts(supported=supported, partial=partial, coverage=coverage), best_f1, macro


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument(
        "--grades",
        type=Path,
        default=ROOT / "reports" / "audit" / "wice_tune_grades.jsonl",
        help="JSON lines of each tune claim's class probabilities (reused, extended)",
    )
    args = parser.parse_args(argv)
    items = [c for c in load_claims(args.data) if wice_split(c["id"], "tune")]
    args.grades.parent.mkdir(parents=True, exist_ok=True)
    picks = pick_evidence(items)
    probs = grade_claims(items, picks, args.grades)
    cuts, f1, macro = fit(items, picks, probs)
    shipped = Cuts()
    gold = [it["label"] for it in items]
    shipped_levels = levels(items, picks, probs, shipped)
    print(
        f"{len(items)} tune claims; chosen {cuts}: supported-vs-rest F1 {f1:.3f}, "
        f"macro-F1 {macro:.3f} (in-sample)"
    )
    print(
        f"shipped {shipped}: supported-vs-rest F1 "
        f"{label_f1(gold, shipped_levels, 'supported').f1:.3f}, macro-F1 "
        f"{macro_f1(gold, shipped_levels, WICE_LABELS):.3f} (in-sample)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
