"""``local:qwen mode=score`` on CLAPnq's sufficiency dev split: F1 of "insufficient", out of set.

    nice python bench/sufficiency_clapnq.py ../shared/data/clapnq/sufficiency_dev.jsonl \\
        [--limit 200] [--cache bench/.cache/sufficiency_clapnq.json] [--option n_threads=1]

The model's readings (``P(Yes)`` per part and passage and for the whole context, see
:mod:`evidex.judges._qwen_sufficiency`) are computed once per question and kept in the cache
file, keyed by the prompt wording and the model; the fits below then cost no model call.

``--limit N`` measures a deterministic stratified subset: the first N/2 answerable and N/2
unanswerable questions in the order of the sha256 of their id. Every threshold is fitted on
one half of the questions (split by the sha256 of the id) and reported on the other, in both
directions: the combination weight and the cut point on ``P(sufficient)`` that maximise F1 of
"insufficient" while at most 20% of the fit half's answerable questions get an insufficient
verdict. Intervals are 95% percentile bootstraps over the questions of the reported half.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _options import add_option_flag, judge_options
from _report import write_section
from evidex.evaluate import metrics as m
from evidex.evaluate.golden import SufficiencyGolden, load_golden
from evidex.jobs.sufficiency import SufficiencyPolicy, decide
from evidex.judges import _qwen_sufficiency as qs
from evidex.judging import PassageText
from evidex.tasks.sufficiency import SufficiencyPayload, SufficiencyValue
from evidex.types import RiskLevel

TARGET_F1 = 0.70
MAX_ANSWERABLE_INSUFFICIENT = 0.20
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Candidate ``context_weight`` values: 0 reads only the per-passage question, 1 only the
whole-context one."""

VARIANTS: dict[str, dict[str, str]] = {
    "v1": {},
    "v2": {
        "PASSAGE_QUESTION": "Does passage {pid} contain the information that answers this "
        "question?",
        "CONTEXT_QUESTION": "Can this question be answered from the passages alone?",
    },
}
"""Prompt wordings tried: ``v1`` is the module's own; others replace its question lines."""
DEFAULT_WORDING = {name: getattr(qs, name) for name in ("PASSAGE_QUESTION", "CONTEXT_QUESTION")}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def subset(records: Sequence[SufficiencyGolden], limit: int | None) -> list[SufficiencyGolden]:
    """Answerable and unanswerable questions alternating, each class in sha256-of-id order."""
    by_class = [
        sorted((r for r in records if r.sufficient is v), key=lambda r: sha(r.id))
        for v in (True, False)
    ]
    half = None if limit is None else limit // 2
    chosen = [rs[:half] for rs in by_class]
    out = [r for pair in zip(*chosen, strict=False) for r in pair]
    return out


def half_of(record: SufficiencyGolden) -> int:
    return int(sha("half:" + record.id)[:8], 16) % 2


def load_records(path: Path) -> list[SufficiencyGolden]:
    if path.is_dir():
        path = path / "sufficiency_dev.jsonl"
    return load_golden(path, "sufficiency")


def payload_of(record: SufficiencyGolden) -> SufficiencyPayload:
    return SufficiencyPayload(query=record.question, passages=PassageText.of(record.passages))


# ---------------------------------------------------------------------- readings


def cache_key(variant: str, model_version: str) -> str:
    wording = [
        qs.INSTRUCTIONS,
        qs.PASSAGE_QUESTION,
        qs.PART_QUESTION,
        qs.CONTEXT_QUESTION,
        qs.QUESTION_LINE,
        qs.SENTENCES_PER_PART,
    ]
    return f"{variant}:{model_version}:{sha(json.dumps(wording))[:12]}"


def readings_of(
    records: Sequence[SufficiencyGolden], cache: Path, variant: str, options: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Each question's readings, from the cache file when it holds them, else computed."""
    for name, text in {**DEFAULT_WORDING, **VARIANTS[variant]}.items():
        setattr(qs, name, text)
    from evidex.judges._qwen import QwenJudge, QwenOptions

    judge = QwenJudge(options=QwenOptions(mode="score", **options))
    key = cache_key(variant, judge.model_name())
    saved: dict[str, Any] = json.loads(cache.read_text(encoding="utf-8")) if cache.exists() else {}
    done: dict[str, dict[str, Any]] = saved.setdefault(key, {})
    todo = [r for r in records if r.id not in done]
    if todo:
        scorer = qs.SufficiencyScorer(
            qs.model_yes(judge.class_probabilities), judge._snippets.embed, name=judge.judge_id
        )
        started = time.perf_counter()
        for count, record in enumerate(todo, 1):
            t0, busy0 = time.perf_counter(), judge.busy_s
            readings, picked = scorer.readings(payload_of(record))
            done[record.id] = {
                "parts": list(readings.parts),
                "per_passage": {p: dict(v) for p, v in readings.per_passage.items()},
                "context": readings.context,
                "shown": len(picked.shown),
                "seconds": time.perf_counter() - t0,
                "model_seconds": judge.busy_s - busy0,
            }
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(saved), encoding="utf-8")
            print(
                f"{variant} {count}/{len(todo)} ({time.perf_counter() - started:.0f} s) "
                f"ctx {readings.context:.2f} cov {min(readings.coverage().values()):.2f} "
                f"gold {record.sufficient}",
                file=sys.stderr,
                flush=True,
            )
    return {r.id: done[r.id] for r in records}


def p_sufficient(reading: Mapping[str, Any], weight: float) -> float:
    readings = qs.Readings(tuple(reading["parts"]), reading["per_passage"], reading["context"])
    return qs.SufficiencyCuts(context_weight=weight).combine(readings)


# ---------------------------------------------------------------------- fit and report

Unit = tuple[bool, float]
"""(gold sufficient, P(sufficient))."""


def f1_insufficient(units: Sequence[Unit], cut: float) -> float:
    gold = ["sufficient" if g else "insufficient" for g, _ in units]
    pred = ["sufficient" if p >= cut else "insufficient" for _, p in units]
    return m.label_f1(gold, pred, "insufficient").f1


def answerable_insufficient(units: Sequence[Unit], cut: float) -> float:
    answerable = [p for g, p in units if g]
    return sum(p < cut for p in answerable) / len(answerable) if answerable else float("nan")


def fit_cut(units: Sequence[Unit]) -> tuple[float, float]:
    """The cut of best F1 (insufficient) among those leaving at most 20% of answerable
    questions insufficient, and that F1; cuts are midpoints between observed values."""
    values = sorted({p for _, p in units})
    cuts = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(values)] + [1.01]
    best = (0.0, -1.0)
    for cut in cuts:
        if answerable_insufficient(units, cut) > MAX_ANSWERABLE_INSUFFICIENT:
            continue
        f1 = f1_insufficient(units, cut)
        if f1 > best[1]:
            best = (cut, f1)
    return best


def decisions(units: Sequence[Unit], cut: float, policy: SufficiencyPolicy) -> list[str]:
    cuts = qs.SufficiencyCuts(sufficient=cut)
    out = []
    for _, p in units:
        verdict = p >= cut
        value = SufficiencyValue(
            sufficient=verdict, confidence=cuts.confidence(p, verdict), missing=["x"]
        )
        out.append(decide(value, risk=RiskLevel.LOW, policy=policy).decision)
    return out


def roc_auc(units: Sequence[Unit]) -> float:
    pos = [p for g, p in units if g]
    neg = [p for g, p in units if not g]
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg)) if pos and neg else float("nan")


def fmt(interval: m.Interval) -> str:
    return f"{interval.value:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def report(
    records: Sequence[SufficiencyGolden], readings: Mapping[str, Mapping[str, Any]], samples: int
) -> tuple[str, dict[str, Any]]:
    halves = [[r for r in records if half_of(r) == h] for h in (0, 1)]
    lines = [
        "| fit on → reported on | questions (answerable) | weight | cut | F1 insufficient "
        "[95% CI] | answerable insufficient [95% CI] | answerable abstained, policy 0.7 | "
        "answerable abstained, every insufficient abstains | escalated, policy 0.7 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    figures: dict[str, Any] = {}
    for fit_h, rep_h in ((0, 1), (1, 0)):

        def units(rs: Sequence[SufficiencyGolden], w: float) -> list[Unit]:
            return [(r.sufficient, p_sufficient(readings[r.id], w)) for r in rs]

        fits = [(fit_cut(units(halves[fit_h], w)), w) for w in WEIGHTS]
        (cut, _), weight = max(fits, key=lambda f: f[0][1])
        rep = units(halves[rep_h], weight)
        f1 = m.bootstrap_ci(rep, lambda s, c=cut: f1_insufficient(s, c), samples=samples)
        ans = m.bootstrap_ci(
            [u for u in rep if u[0]],
            lambda s, c=cut: answerable_insufficient(s, c),
            samples=samples,
        )
        gold = [g for g, _ in rep]
        default = decisions(rep, cut, SufficiencyPolicy())
        eager = decisions(rep, cut, SufficiencyPolicy(abstain_confidence=0.5))
        abst = [
            sum(d == "abstain" for g, d in zip(gold, ds, strict=True) if g) / sum(gold)
            for ds in (default, eager)
        ]
        esc = sum(d == "escalate" for d in default) / len(default)
        lines.append(
            f"| half {fit_h} → half {rep_h} | {len(rep)} ({sum(gold)}) | {weight:g} | "
            f"{cut:.3f} | {fmt(f1)} | {fmt(ans)} | {abst[0]:.1%} | {abst[1]:.1%} | {esc:.1%} |"
        )
        figures[f"{fit_h}->{rep_h}"] = {
            "weight": weight,
            "cut": cut,
            "f1": f1.value,
            "f1_low": f1.low,
            "f1_high": f1.high,
            "answerable_insufficient": ans.value,
            "abstained_answerable": abst,
        }
    everything = [(r.sufficient, readings[r.id]) for r in records]
    aucs = ", ".join(
        f"{name} {roc_auc([(g, p_sufficient(x, w)) for g, x in everything]):.3f}"
        for name, w in (
            ("per-passage question", 0.0),
            ("whole-context question", 1.0),
            ("their mean", 0.5),
        )
    )
    seconds = [x["seconds"] for _, x in everything]
    lines += [
        "",
        f"ROC AUC of P(sufficient) for sufficient, all {len(records)} questions (no threshold): "
        f"{aucs}. Median {statistics.median(seconds):.1f} s a question "
        f"({statistics.median(x['shown'] for _, x in everything):.0f} sentences shown).",
    ]
    return "\n".join(lines), figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--cache", type=Path, default=Path(__file__).parent / ".cache" / "sufficiency_clapnq.json"
    )
    parser.add_argument("--variant", choices=sorted(VARIANTS), action="append")
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--section", default="sufficiency_clapnq", help="the docs/benchmarks.md section to write"
    )
    add_option_flag(parser)
    args = parser.parse_args(argv)
    records = subset(load_records(args.data), args.limit)
    options = judge_options(args.option)
    bodies = []
    for variant in args.variant or ["v1"]:
        readings = readings_of(records, args.cache, variant, options)
        table, figures = report(records, readings, args.bootstrap)
        print(json.dumps(figures, indent=1))
        wording = {
            **{"PASSAGE_QUESTION": qs.PASSAGE_QUESTION, "CONTEXT_QUESTION": qs.CONTEXT_QUESTION},
            **VARIANTS[variant],
        }
        bodies.append(
            f"### Prompt {variant}\n\nPer passage: {wording['PASSAGE_QUESTION']!r}; whole "
            f"context: {wording['CONTEXT_QUESTION']!r}.\n\n{table}"
        )
    n = len(records)
    scope = (
        f"a deterministic stratified subset of {n} questions ({n // 2} answerable, {n // 2} "
        "unanswerable; the first of each class by sha256 of the id)"
        if args.limit
        else f"all {n} questions"
    )
    body = (
        f"`local:qwen` with `mode=score` on CLAPnq dev ({scope}): per question, P(Yes) to "
        '"does passage X state the answer" and to "do the passages together state '
        'everything needed", over the sentences MiniLM picks, combined as P(sufficient) = w * '
        "P(context) + (1 - w) * P(passage). The weight w and the cut on P(sufficient) are fitted "
        "on one half of the questions (split by sha256 of the id) to maximise F1 of "
        f"insufficient with at most {MAX_ANSWERABLE_INSUFFICIENT:.0%} of the half's answerable "
        "questions insufficient, and reported on the other half, both ways; intervals are 95% "
        "bootstraps over the reported half's questions. Abstained shares apply "
        "SufficiencyPolicy to the confidence (P(sufficient) rescaled so the cut is 0.5): the "
        "default policy (abstain at confidence 0.7, else escalate) and one where every "
        f"insufficient verdict abstains. Target: F1 >= {TARGET_F1} with at most 20% of "
        "answerable questions abstained.\n\n" + "\n\n".join(bodies)
    )
    if not args.no_write:
        title = "Sufficiency: local:qwen score mode on CLAPnq"
        if args.section != "sufficiency_clapnq":
            title += f" ({', '.join(args.variant or ['v1'])} on {n} questions)"
        write_section(args.section, title, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
