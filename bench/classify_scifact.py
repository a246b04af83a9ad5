"""Quality of the classify job on SciFact (train split): cited labels for scientific claims.

    python bench/classify_scifact.py [--data ../shared/data] [--sample 30] [--judge local:qwen]
        [--option mode=score] [--split all|tune|report]

Each sampled claim is the input; the passages are the sentences of its cited abstracts, with ids
``DOCID:SENTIDX`` and their order as rank; the taxonomy is SUPPORT / CONTRADICT /
NOT_ENOUGH_INFO, single-label, risk low. Gold: the label of the claim's evidence sets
(NOT_ENOUGH_INFO when it has none); rationale: the sentence ids of those sets. The sample is
seeded and stratified by gold label in train proportions.

Scoring: an ``unclassifiable`` answer (a fallback included) counts as NOT_ENOUGH_INFO. Citations
are the passages of the supporting evidence of a SUPPORT or CONTRADICT answer (a quote behind
NOT_ENOUGH_INFO cites nothing); precision and recall are micro-averaged against the rationale
sentences over every sampled claim, so a citation on a claim without rationale counts against
precision. The verbatim share is measured on the judge's raw replies, every attempt, before
validation: quotes found word for word (after whitespace normalisation) in the passage they name.
The cache is off, so every figure comes from fresh judge calls. Figures go to docs/benchmarks.md,
section ``classify_scifact`` (``classify_scifact_score`` with ``--option mode=score``).

``--split tune`` keeps the claims whose id hashes to 0 mod 3 (as ``bench/audit_wice.py``),
``--split report`` the rest; the sample is drawn within the split. On ``tune`` with
``--option mode=score`` the bench does not run the job: it reads every label's P(Yes) for each
claim (:class:`~evidex.judges._qwen_classify.ClassifyScorer`, the judge's own scoring) and
prints the cut point of best macro-F1, which is the shipped ``ClassifyCuts.assign``; figures
are then measured on ``report``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _options import add_option_flag, judge_options
from _report import write_section
from audit_wice import SPLITS, in_split
from evidex.evaluate.classify import cited_passages, predicted_labels, raw_quote_counts
from evidex.evaluate.datasets import SCIFACT_CONSTRAINTS, SCIFACT_LABELS, SCIFACT_TAXONOMY
from evidex.evaluate.metrics import (
    accuracy,
    bootstrap_ci,
    citation_scores,
    confusion_matrix,
    macro_f1,
)
from evidex.harness.runner import HarnessSettings
from evidex.jobs._common import resolve_judge, run_sync
from evidex.jobs.classify import ClassifyInput, ClassifyResult, classify_many
from evidex.judges._qwen_classify import ClassifyCuts, ClassifyScorer, model_yes
from evidex.judging import ClassifyPayload
from evidex.store import open_store
from evidex.tasks.classify import ClassifyBatch, ClassifyStep
from evidex.types import Passage

ROOT = Path(__file__).resolve().parent.parent
LABELS = SCIFACT_LABELS
TAXONOMY = SCIFACT_TAXONOMY
CONSTRAINTS = SCIFACT_CONSTRAINTS


def load_items(data: Path) -> list[dict[str, Any]]:
    """Every SciFact train claim with its passages, gold label and rationale sentence ids."""
    root = data / "scifact"
    corpus: dict[str, list[str]] = {}
    with (root / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            corpus[str(row["doc_id"])] = row["abstract"]
    items = []
    with (root / "claims_train.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            evidence: dict[str, list[dict[str, Any]]] = row["evidence"] or {}
            labels = Counter(e["label"] for sets in evidence.values() for e in sets)
            gold = labels.most_common(1)[0][0] if labels else "NOT_ENOUGH_INFO"
            rationale = {
                f"{doc}:{i}" for doc, sets in evidence.items() for e in sets for i in e["sentences"]
            }
            passages = [
                Passage(passage_id=f"{doc}:{i}", text=sentence, rank=rank)
                for rank, (doc, i, sentence) in enumerate(
                    (
                        (doc, i, s)
                        for doc in map(str, row["cited_doc_ids"])
                        for i, s in enumerate(corpus.get(doc, []))
                        if s.strip()
                    ),
                    1,
                )
            ]
            if passages:
                items.append(
                    {
                        "id": str(row["id"]),
                        "claim": row["claim"],
                        "gold": gold,
                        "rationale": rationale,
                        "passages": passages,
                    }
                )
    return items


def stratified_sample(items: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` items, each gold label in its share of the whole (largest remainders), seeded."""
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_label[item["gold"]].append(item)
    quota = {label: n * len(group) / len(items) for label, group in by_label.items()}
    counts = {label: int(q) for label, q in quota.items()}
    for label in sorted(quota, key=lambda k: quota[k] - counts[k], reverse=True):
        if sum(counts.values()) >= n:
            break
        counts[label] += 1
    rng = random.Random(seed)
    picked = []
    for label in sorted(by_label):
        picked += rng.sample(by_label[label], counts[label])
    rng.shuffle(picked)
    return picked


def predicted(result: ClassifyResult) -> str:
    """The scored label: an unclassifiable answer (a fallback too) counts as NOT_ENOUGH_INFO."""
    return predicted_labels(result, "NOT_ENOUGH_INFO")[0]


def cited(result: ClassifyResult) -> set[str]:
    return set(cited_passages(result, "NOT_ENOUGH_INFO"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--sample", type=int, default=30, help="claims to classify")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--judge", default="local:qwen")
    parser.add_argument(
        "--split", choices=SPLITS, default="all", help="train claims to sample from (see above)"
    )
    add_option_flag(parser)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch the docs")
    args = parser.parse_args(argv)
    options = judge_options(args.option)

    items = [i for i in load_items(args.data) if in_split(i["id"], args.split)]
    sample = stratified_sample(items, min(args.sample, len(items)), args.seed)
    if args.split == "tune" and options.get("mode") == "score":
        return fit_cut(sample, args.judge, options)
    load = os.getloadavg()
    texts = {p.passage_id: p.text for item in sample for p in item["passages"]}
    judge = resolve_judge(args.judge, "classify", **options)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/bench.db")
        started = time.perf_counter()
        done = 0

        def tick(finished: int, total: int) -> None:
            nonlocal done
            done = finished
            elapsed = time.perf_counter() - started
            print(f"{finished}/{total} claims, {elapsed:.0f} s", file=sys.stderr, flush=True)

        results = classify_many(
            [ClassifyInput(id=i["id"], input=i["claim"], passages=i["passages"]) for i in sample],
            TAXONOMY,
            judge=judge,
            store=store,
            constraints=CONSTRAINTS,
            settings=HarnessSettings(use_cache=False, timeout_s=900, max_concurrency=1),
            on_progress=tick,
        )
        wall = time.perf_counter() - started
        print(file=sys.stderr)
        rows = store.audit_rows(job="classify")
        store.close()
    run_sync(judge.aclose())

    gold = [i["gold"] for i in sample]
    pred = [predicted(r) for r in results]
    citations = citation_scores([i["rationale"] for i in sample], [cited(r) for r in results])
    verbatim, quotes = raw_quote_counts(rows, texts)
    calls = [r for r in rows if r["status"] in ("ok", "invalid", "error")]
    indices = list(range(len(sample)))
    acc_ci = bootstrap_ci(
        indices, lambda ix: accuracy([gold[i] for i in ix], [pred[i] for i in ix])
    )
    f1_ci = bootstrap_ci(
        indices, lambda ix: macro_f1([gold[i] for i in ix], [pred[i] for i in ix], LABELS)
    )
    matrix = confusion_matrix(gold, pred, LABELS)
    figures = {
        "judge": judge.judge_id,
        "model_version": judge.model_version,
        "options": options,
        "sample": len(sample),
        "gold": dict(Counter(gold)),
        "predicted": dict(Counter(pred)),
        "accuracy": acc_ci.value,
        "accuracy_ci95": [acc_ci.low, acc_ci.high],
        "macro_f1": f1_ci.value,
        "macro_f1_ci95": [f1_ci.low, f1_ci.high],
        "citation_precision_micro": citations["precision_micro"],
        "citation_recall_micro": citations["recall_micro"],
        "verbatim_quotes": verbatim,
        "quotes": quotes,
        "fallbacks": sum(r.source == "fallback" for r in results),
        "retried": sum(r.judge_calls > 1 for r in results),
        "judge_calls": len(calls),
        "passages_dropped_over_budget": sum(len(r.dropped) for r in results),
        "prompt_tokens": sum(r.usage.prompt_tokens for r in results),
        "completion_tokens": sum(r.usage.completion_tokens for r in results),
        "seconds_total": wall,
        "split": args.split,
        "load_average_at_start": [round(x, 1) for x in load],
        "cuts": str(ClassifyCuts()) if options.get("mode") == "score" else None,
        "seconds_per_call_median": statistics.median(
            [r["latency_ms"] / 1000 for r in calls if r["latency_ms"]] or [0.0]
        ),
        "seconds_per_claim_median": statistics.median(_per_run(calls) or [0.0]),
    }
    print(json.dumps(figures, indent=2, default=str))
    if not args.no_write:
        if options.get("mode") == "score":
            title = "classify on SciFact: local:qwen mode=score"
            write_section("classify_scifact_score", title, _body(figures, matrix))
        else:
            write_section("classify_scifact", "classify on SciFact", _body(figures, matrix))
    return 0


def _per_run(calls: list[dict[str, Any]]) -> list[float]:
    """Seconds of judge calls per claim (one run per claim): retries included."""
    total: dict[str, float] = defaultdict(float)
    for row in calls:
        total[row["run_id"]] += (row["latency_ms"] or 0.0) / 1000
    return list(total.values())


def fit_cut(sample: list[dict[str, Any]], judge_spec: str, options: dict[str, Any]) -> int:
    """Read each label's P(Yes) for every claim with the judge's scorer, print the cut point of
    best macro-F1 (unclassifiable counted as NOT_ENOUGH_INFO, as in the report)."""
    from evidex.judges.minilm import MiniLMJudge

    judge = resolve_judge(judge_spec, "classify", **options)
    yes = model_yes(judge.class_probabilities)  # type: ignore[attr-defined]
    scorer = ClassifyScorer(yes, MiniLMJudge().embed, name=judge.judge_id)
    step = ClassifyStep()
    rows = []
    for index, item in enumerate(sample, 1):
        batch = ClassifyBatch(
            input=item["claim"], passages=tuple(item["passages"]), taxonomy=TAXONOMY
        )
        payload = step.request(batch).payload
        assert isinstance(payload, ClassifyPayload)
        started = time.perf_counter()
        probs = scorer.probabilities(payload, scorer.evidence(payload))
        seconds = time.perf_counter() - started
        rows.append({"gold": item["gold"], "probs": probs})
        shown = " ".join(f"{n}={p:.3f}" for n, p in probs.items())
        print(f"[{index}/{len(sample)}] gold={item['gold']} {shown} {seconds:.1f}s", flush=True)
    run_sync(judge.aclose())

    def decide(cut: float) -> list[str]:
        out = []
        for r in rows:
            best = max(r["probs"], key=lambda n: r["probs"][n])
            out.append(best if r["probs"][best] >= cut else "NOT_ENOUGH_INFO")
        return out

    gold = [r["gold"] for r in rows]
    cuts = sorted({0.0} | {max(r["probs"].values()) for r in rows})
    scored = [(macro_f1(gold, decide(c), LABELS), accuracy(gold, decide(c)), c) for c in cuts]
    best_f1 = max(f for f, _, _ in scored)
    cut = min(c for f, _, c in scored if f == best_f1)
    for f, a, c in scored:
        print(f"cut {c:.3f}: macro-F1 {f:.3f} accuracy {a:.3f}")
    print(
        json.dumps(
            {
                "tune_claims": len(rows),
                "gold": dict(Counter(gold)),
                "best_cut": cut,
                "macro_f1": best_f1,
            },
            indent=2,
        )
    )
    return 0


def _body(f: dict[str, Any], matrix: Any) -> str:
    def pct(x: float) -> str:
        return f"{100 * x:.1f} %"

    share = f["verbatim_quotes"] / f["quotes"] if f["quotes"] else float("nan")
    load = ", ".join(str(x) for x in f["load_average_at_start"])
    scoring = (
        f"Scoring mode: the encoder's candidate sentences quoted by code, one Yes/No question "
        f"per label, the most probable label at or above the cut point ({f['cuts']}, fitted on "
        "the tune split with `--split tune`), else unclassifiable "
        "(`evidex.judges._qwen_classify`). "
        if f["cuts"]
        else ""
    )
    lines = [
        f"Judge `{f['judge']}` ({f['model_version']}, options {f['options']}); "
        f"{f['sample']} SciFact train claims of the `{f['split']}` split, "
        f"seeded sample stratified by gold label (gold: {f['gold']}); single-label, risk low, "
        "cache off. Passages: the sentences of the cited abstracts (`DOCID:SENTIDX`). "
        f"{scoring}Load average (1, 5, 15 min) at the start: {load}; 2 cores.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| label accuracy | {pct(f['accuracy'])} (95 % CI {pct(f['accuracy_ci95'][0])} – "
        f"{pct(f['accuracy_ci95'][1])}) |",
        f"| macro-F1 (3 labels) | {f['macro_f1']:.3f} (95 % CI {f['macro_f1_ci95'][0]:.3f} – "
        f"{f['macro_f1_ci95'][1]:.3f}) |",
        f"| citation precision (micro) | {f['citation_precision_micro']:.3f} |",
        f"| citation recall (micro) | {f['citation_recall_micro']:.3f} |",
        f"| verbatim quotes in raw replies | {f['verbatim_quotes']} / {f['quotes']} "
        f"({pct(share)}) |",
        f"| results retried / fell back | {f['retried']} / {f['fallbacks']} |",
        f"| judge calls | {f['judge_calls']} |",
        f"| passages dropped over budget | {f['passages_dropped_over_budget']} |",
        f"| tokens (prompt + completion) | {f['prompt_tokens']} + {f['completion_tokens']} |",
        f"| wall time | {f['seconds_total']:.0f} s (median call {f['seconds_per_call_median']:.1f}"
        f" s, median claim {f['seconds_per_claim_median']:.1f} s) |",
        "",
        f"Predicted labels: {f['predicted']}. Confusion matrix (rows gold, columns predicted, "
        f"order {', '.join(LABELS)}): `{matrix.tolist()}`.",
        "",
        "Unclassifiable answers and fallbacks count as NOT_ENOUGH_INFO. Citations are the "
        "supporting passages of SUPPORT/CONTRADICT answers against the rationale sentences, "
        "micro-averaged over all sampled claims. The verbatim share is measured on the raw "
        "replies of every attempt, before validation (the validated output is verbatim by "
        "construction).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
