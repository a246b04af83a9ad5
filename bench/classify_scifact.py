"""Quality of the classify job on SciFact (train split): cited labels for scientific claims.

    python bench/classify_scifact.py [--data ../shared/data] [--sample 30] [--judge local:qwen]

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
section ``classify_scifact``.
"""

from __future__ import annotations

import argparse
import json
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
from evidex.store import open_store
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
    add_option_flag(parser)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch the docs")
    args = parser.parse_args(argv)
    options = judge_options(args.option)

    items = load_items(args.data)
    sample = stratified_sample(items, min(args.sample, len(items)), args.seed)
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
        "seconds_per_call_median": statistics.median(
            [r["latency_ms"] / 1000 for r in calls if r["latency_ms"]] or [0.0]
        ),
    }
    print(json.dumps(figures, indent=2, default=str))
    if not args.no_write:
        write_section("classify_scifact", "classify on SciFact", _body(figures, matrix))
    return 0


def _body(f: dict[str, Any], matrix: Any) -> str:
    def pct(x: float) -> str:
        return f"{100 * x:.1f} %"

    share = f["verbatim_quotes"] / f["quotes"] if f["quotes"] else float("nan")
    lines = [
        f"Judge `{f['judge']}` ({f['model_version']}, options {f['options']}); "
        f"{f['sample']} SciFact train claims, "
        f"seeded sample stratified by gold label (gold: {f['gold']}); single-label, risk low, "
        "cache off. Passages: the sentences of the cited abstracts (`DOCID:SENTIDX`).",
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
        " s) |",
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
