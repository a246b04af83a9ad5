"""Quality of the audit job on WiCE (dev split): claim-level support against cited evidence.

    python bench/audit_wice.py [--data ../shared/data] [--sample 30] [--judge local:qwen]

Each sampled WiCE claim is audited as a one-claim answer: the claim text is the answer and its
only claim (so only the classification pass runs and the claim boundary is WiCE's own), and the
sentences of the claim's first oracle chunk (gold supporting sentences plus distractors) are the
passages ``passage-1`` ... in their order. The sample is seeded and stratified by gold label in
dev proportions.

Labels are mapped as the issue states: supported → fully_supported, partially_supported →
partially_supported, not_supported → unsupported or inferred. A claim whose audit fell back
(still invalid after the retry) keeps what the job outputs, ``unsupported``, and is counted as
a fallback as well. Reported: 3-way macro-F1, precision/recall/F1 of "supported vs the rest"
(the figure published for WiCE), bootstrap 95 % intervals, the confusion matrix, the 4-way
prediction counts, fallbacks, retries and seconds per claim. Figures go to docs/benchmarks.md,
section ``audit_wice``.

``--split tune`` keeps the claims whose id hashes to 0 mod 3 (a third of dev, where cut points
are fitted), ``--split report`` the other two thirds, ``all`` (the default) every claim; the
sample is drawn within the split, so figures reported on ``report`` never saw the fit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _options import add_option_flag, judge_options
from _report import write_section
from evidex.evaluate.datasets import AUDIT_TO_WICE, WICE_LABELS
from evidex.evaluate.metrics import bootstrap_ci, confusion_matrix, label_f1, macro_f1
from evidex.harness.runner import HarnessSettings
from evidex.jobs._common import resolve_judge, run_sync
from evidex.jobs.audit import audit
from evidex.store import open_store
from evidex.types import Passage

ROOT = Path(__file__).resolve().parent.parent
LABELS = WICE_LABELS
TO_WICE = AUDIT_TO_WICE


def load_claims(data: Path) -> list[dict[str, Any]]:
    """One item per WiCE dev claim: its text, gold label, first oracle chunk, and the
    positions in that chunk (1-based, as :func:`claim_passages` numbers them) of the gold
    supporting sentences."""
    path = data / "wice" / "oracle_chunks" / "dev.jsonl"
    first: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            first.setdefault(row["meta"]["id"], row)
    return [
        {
            "id": cid,
            "claim": row["claim"],
            "label": row["label"],
            "evidence": row["evidence"],
            "oracle": [
                i
                for i, at in enumerate(row["meta"]["chunk_idx"], 1)
                if at in row["meta"].get("oracle_idx", ())
            ],
        }
        for cid, row in first.items()
    ]


def claim_passages(item: dict[str, Any]) -> list[Passage]:
    """A claim's passages as the audit job gets them: its chunk's non-blank sentences, with
    ids ``passage-1`` ... by position in the chunk."""
    return [
        Passage(passage_id=f"passage-{i}", text=s)
        for i, s in enumerate(item["evidence"], 1)
        if s.strip()
    ]


SPLITS = ("all", "tune", "report")


def in_split(claim_id: str, split: str) -> bool:
    """Whether a claim belongs to ``split``: ``tune`` is the third of dev whose id's sha256
    is 0 mod 3, ``report`` the rest."""
    if split == "all":
        return True
    tune = int(hashlib.sha256(claim_id.encode("utf-8")).hexdigest(), 16) % 3 == 0
    return tune == (split == "tune")


def stratified_sample(items: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` items with the labels in their dev proportions (largest remainders), seeded."""
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_label[item["label"]].append(item)
    n = min(n, len(items))
    quotas = {lb: n * len(v) / len(items) for lb, v in by_label.items()}
    counts = {lb: int(q) for lb, q in quotas.items()}
    for lb in sorted(quotas, key=lambda k: quotas[k] - counts[k], reverse=True)[
        : n - sum(counts.values())
    ]:
        counts[lb] += 1
    rng = random.Random(seed)
    picked = [it for lb in sorted(by_label) for it in rng.sample(by_label[lb], counts[lb])]
    rng.shuffle(picked)
    return picked


def run(
    items: Sequence[dict[str, Any]], judge_spec: str, db: str, options: dict[str, Any]
) -> list[dict[str, Any]]:
    judge = resolve_judge(judge_spec, "audit", **options)
    store = open_store(db)
    settings = HarnessSettings(timeout_s=900.0, max_concurrency=1, use_cache=False, backoff_s=1.0)
    rows = []
    try:
        for index, item in enumerate(items, 1):
            passages = claim_passages(item)
            started = time.perf_counter()
            result = audit(
                item["claim"],
                passages,
                answer_id=item["id"],
                claims=[item["claim"]],
                judge=judge,
                store=store,
                settings=settings,
            )
            seconds = time.perf_counter() - started
            (claim,) = result.claims
            rows.append(
                {
                    "id": item["id"],
                    "gold": item["label"],
                    "level": claim.classification,
                    "pred": TO_WICE[claim.classification],
                    "source": result.source,
                    "calls": result.judge_calls,
                    "seconds": seconds,
                }
            )
            timing = getattr(judge, "last_timing", None)
            print(
                f"[{index}/{len(items)}] {item['id']} gold={item['label']} "
                f"pred={claim.classification} source={result.source} "
                f"calls={result.judge_calls} {seconds:.1f}s"
                + (f" last call: {timing}" if timing else ""),
                flush=True,
            )
            for attempt, (errors, raw) in enumerate(_rejected(store, result.run_id), 1):
                print(f"    attempt {attempt} rejected: {'; '.join(errors)[:600]}", flush=True)
                print(f"    its reply: {(raw or '')[:600]}", flush=True)
    finally:
        run_sync(judge.aclose())
        store.close()
    return rows


def _rejected(store: Any, run_id: str) -> list[tuple[list[str], str | None]]:
    """Errors and raw reply of each rejected attempt of one run, from the audit log."""
    rows = store.audit_rows(run_id=run_id, job="audit")
    return [
        (list(r["errors"]), r["raw_output"]) for r in rows if r["status"] in ("invalid", "error")
    ]


def report(
    rows: Sequence[dict[str, Any]],
    judge_spec: str,
    sample: int,
    seed: int,
    wall: float,
    split: str = "all",
    options: dict[str, Any] | None = None,
    load: tuple[float, float] | None = None,
) -> str:
    gold = [r["gold"] for r in rows]
    pred = [r["pred"] for r in rows]

    def macro(units: Sequence[dict[str, Any]]) -> float:
        return macro_f1([u["gold"] for u in units], [u["pred"] for u in units], LABELS)

    def binary(units: Sequence[dict[str, Any]]) -> float:
        return label_f1([u["gold"] for u in units], [u["pred"] for u in units], "supported").f1

    m_ci, b_ci = bootstrap_ci(rows, macro), bootstrap_ci(rows, binary)
    prf = label_f1(gold, pred, "supported")
    matrix = confusion_matrix(gold, pred, LABELS)
    head = "| gold ↓ / audit → | " + " | ".join(LABELS) + " |"
    table = [head, "|---|" + "---:|" * len(LABELS)] + [
        f"| {lb} | " + " | ".join(str(int(v)) for v in matrix[i]) + " |"
        for i, lb in enumerate(LABELS)
    ]
    levels = Counter(r["level"] for r in rows)
    fallbacks = sum(r["source"] == "fallback" for r in rows)
    retried = sum(r["calls"] > 1 for r in rows)
    seconds = [r["seconds"] for r in rows]
    return "\n".join(
        [
            f"Judge `{judge_spec}`"
            + (f" with options `{json.dumps(options, sort_keys=True)}`" if options else "")
            + ", classification pass on WiCE dev claims given as one-claim "
            f"answers; passages = the sentences of each claim's first oracle chunk. Sample: "
            f"{len(rows)} of the {split} split of 349 claims (seeded {seed}, stratified by "
            "gold label: "
            + ", ".join(f"{lb} {gold.count(lb)}" for lb in LABELS)
            + f"); requested --sample {sample}.",
            "",
            f"- 3-way macro-F1: **{m_ci.value:.3f}** "
            f"(95 % bootstrap CI {m_ci.low:.3f}–{m_ci.high:.3f})",
            f"- supported vs the rest: precision {prf.precision:.3f}, recall {prf.recall:.3f}, "
            f"**F1 {prf.f1:.3f}** (CI {b_ci.low:.3f}–{b_ci.high:.3f}); published reference: "
            "GPT-4 ≈ 0.61 on WiCE claims",
            "- audit classifications: " + ", ".join(f"{lv} {levels.get(lv, 0)}" for lv in TO_WICE),
            f"- fallbacks (invalid after the retry, counted as unsupported): {fallbacks}; "
            f"claims that needed the retry: {retried}",
            f"- seconds per claim: median {statistics.median(seconds):.1f}, "
            f"max {max(seconds):.1f}; "
            f"wall time {wall / 60:.1f} min"
            + (
                f"; 1-min load average before / after: {load[0]:.1f} / {load[1]:.1f}"
                if load
                else ""
            ),
            "",
            "Confusion matrix (rows gold, columns the audit mapped to WiCE labels):",
            "",
            *table,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--sample", type=int, default=30, help="claims to audit (stratified)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--split", choices=SPLITS, default="all", help="dev claims to sample from (see above)"
    )
    parser.add_argument("--judge", default="local:qwen", help="judge spec (default local:qwen)")
    add_option_flag(parser)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch the docs")
    args = parser.parse_args(argv)
    options = judge_options(args.option)
    claims = [c for c in load_claims(args.data) if in_split(c["id"], args.split)]
    items = stratified_sample(claims, args.sample, args.seed)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run(items, args.judge, f"sqlite:///{tmp}/bench.db", options)
    wall = time.perf_counter() - started
    load = (load_before, os.getloadavg()[0])
    body = report(rows, args.judge, args.sample, args.seed, wall, args.split, options, load)
    print(body)
    if not args.no_write:
        write_section("audit_wice", "Audit on WiCE (claim support)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
