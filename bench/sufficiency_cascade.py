"""The cascade's cheap stage for the sufficiency job on CLAPnq dev, out of set.

    python bench/sufficiency_cascade.py ../shared/data/clapnq/sufficiency_dev.jsonl \\
        [--cache bench/.cache/sufficiency_clapnq.json] [--write-band] [--no-write]

With ``cascade:local:minilm,EXPENSIVE`` the sufficiency job settles a query on the cheap stage
when no passage scores ``none_relevant_below`` or more (:mod:`evidex.jobs._sufficiency_cascade`):
insufficient, with no call to the expensive judge. Settling an answerable question abstains
wrongly, so the edge is the largest one that settles at most 2% of the fit half's answerable
questions. It is fitted on one half of the questions (split by the sha256 of the id, as
``bench/sufficiency_clapnq.py`` splits them) and reported on the other, both ways, with 95%
bootstrap intervals over the reported half's questions.

The cascade with ``local:qwen mode=score`` as the expensive stage is then measured on the
questions whose qwen readings ``bench/sufficiency_clapnq.py`` recorded (``--cache``): qwen's
weight and cut fitted on the fit half as that bench fits them, the cheap stage's edge on the
same half; both reported on the other half beside qwen alone. ``local:minilm`` scores are
computed here, by the shipped judge, for all 600 questions.

``--write-band`` writes the edge fitted on all 600 questions into the shipped band of
``local:minilm`` (``src/evidex/data/cascade/band.json``), with the fit's record.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _report import write_section
from evidex.evaluate import metrics as m
from evidex.judges import get_judge
from sufficiency_clapnq import (
    WEIGHTS,
    answerable_insufficient,
    cache_key,
    f1_insufficient,
    fit_cut,
    fmt,
    half_of,
    load_records,
    p_sufficient,
)

MAX_SETTLED_ANSWERABLE = 0.02
BAND = Path(__file__).resolve().parents[1] / "src" / "evidex" / "data" / "cascade" / "band.json"

Scored = tuple[bool, float]
"""(gold sufficient, best local:minilm score of the question's passages)."""


def fit_edge(units: Sequence[Scored]) -> float:
    """The largest edge (a midpoint between observed best scores) that settles at most
    :data:`MAX_SETTLED_ANSWERABLE` of the answerable questions."""
    answerable = sorted(s for g, s in units if g)
    allowed = int(MAX_SETTLED_ANSWERABLE * len(answerable))
    if allowed >= len(answerable):
        return float("inf")
    # settling those strictly below the edge: at most `allowed` answerable ones below it
    return answerable[allowed] if allowed else answerable[0]


def settled_share(units: Sequence[Scored], edge: float) -> float:
    return sum(s < edge for _, s in units) / len(units) if units else float("nan")


def precision(units: Sequence[Scored], edge: float) -> float:
    settled = [g for g, s in units if s < edge]
    return sum(not g for g in settled) / len(settled) if settled else float("nan")


def answerable_settled(units: Sequence[Scored], edge: float) -> float:
    answerable = [s for g, s in units if g]
    return sum(s < edge for s in answerable) / len(answerable) if answerable else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument(
        "--cache", type=Path, default=Path(__file__).parent / ".cache" / "sufficiency_clapnq.json"
    )
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--write-band", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    records = load_records(args.data)
    cheap = get_judge("local:minilm")
    best = {r.id: max(cheap.score(r.question, [p.text for p in r.passages])) for r in records}
    halves = [[r for r in records if half_of(r) == h] for h in (0, 1)]
    rows = [
        "| fit on → reported on | questions (answerable) | edge | settled by the cheap stage "
        "[95% CI] | of them insufficient [95% CI] | answerable settled [95% CI] |",
        "|---|---|---|---|---|---|",
    ]
    readings = _readings(args.cache)
    combined = [
        "| fit on → reported on | questions (answerable) | judge | F1 insufficient [95% CI] | "
        "answerable insufficient [95% CI] | expensive calls |",
        "|---|---|---|---|---|---|",
    ]
    figures: dict[str, Any] = {}
    for fit_h, rep_h in ((0, 1), (1, 0)):
        fit = [(r.sufficient, best[r.id]) for r in halves[fit_h]]
        rep = [(r.sufficient, best[r.id]) for r in halves[rep_h]]
        edge = fit_edge(fit)
        shares = [
            m.bootstrap_ci(rep, lambda s, e=edge: settled_share(s, e), samples=args.bootstrap),
            m.bootstrap_ci(rep, lambda s, e=edge: precision(s, e), samples=args.bootstrap),
            m.bootstrap_ci(
                [u for u in rep if u[0]],
                lambda s, e=edge: answerable_settled(s, e),
                samples=args.bootstrap,
            ),
        ]
        rows.append(
            f"| half {fit_h} → half {rep_h} | {len(rep)} ({sum(g for g, _ in rep)}) | "
            f"{edge:.4f} | " + " | ".join(fmt(x) for x in shares) + " |"
        )
        figures[f"{fit_h}->{rep_h}"] = {
            "edge": edge,
            **{
                k: x.value
                for k, x in zip(("settled", "precision", "answerable_settled"), shares, strict=True)
            },
        }
        if readings:
            combined += _with_qwen(halves, fit_h, rep_h, readings, best, edge, args.bootstrap)
    body = (
        f"The cascade's cheap stage (`local:minilm`) settles a sufficiency query as insufficient "
        f"when no passage scores `none_relevant_below` or more. The edge is fitted on one half "
        f"of CLAPnq dev's {len(records)} questions (split by sha256 of the id) as the largest "
        f"that settles at most {MAX_SETTLED_ANSWERABLE:.0%} of the half's answerable questions, "
        "and reported on the other half, both ways; 95% bootstrap intervals over the reported "
        "half's questions. CLAPnq's unanswerable questions come with a passage of the right "
        "article, so this is the hard case for an encoder: it settles only a retrieval with "
        "nothing on the query's topic.\n\n" + "\n".join(rows)
    )
    if readings:
        body += (
            "\n\nThe cascade with `local:qwen mode=score` as the expensive stage, on the "
            f"{len(readings)} questions whose qwen readings bench/sufficiency_clapnq.py recorded "
            "(its stratified subset): qwen's weight and cut and the cheap stage's edge fitted "
            "on the fit half, reported on the other; qwen alone beside it, on the same "
            "questions.\n\n" + "\n".join(combined)
        )
    if args.write_band:
        every = [(r.sufficient, best[r.id]) for r in records]
        edge = fit_edge(every)
        _write_band(edge, len(records), answerable_settled(every, edge))
        body += (
            f"\n\nShipped (`src/evidex/data/cascade/band.json`, `local:minilm`): "
            f"`none_relevant_below` = {edge:.4f}, fitted on all {len(records)} questions."
        )
    print(body)
    print(json.dumps(figures, indent=1))
    if not args.no_write:
        write_section("sufficiency_cascade", "Sufficiency: the cascade's cheap stage", body)
    return 0


def _readings(cache: Path) -> dict[str, Mapping[str, Any]]:
    """The v1 qwen readings the sufficiency_clapnq bench recorded, by question id."""
    if not cache.exists():
        return {}
    from evidex.judges._qwen import QwenJudge, QwenOptions

    key = cache_key("v1", QwenJudge(options=QwenOptions(mode="score")).model_name())
    saved: dict[str, Any] = json.loads(cache.read_text(encoding="utf-8"))
    return dict(saved.get(key, {}))


def _with_qwen(
    halves: Sequence[Sequence[Any]],
    fit_h: int,
    rep_h: int,
    readings: Mapping[str, Mapping[str, Any]],
    best: Mapping[str, float],
    edge: float,
    samples: int,
) -> list[str]:
    """The rows of qwen alone and of the cascade on the reported half's recorded questions."""
    fit = [r for r in halves[fit_h] if r.id in readings]
    rep = [r for r in halves[rep_h] if r.id in readings]

    def units(rs: Sequence[Any], w: float) -> list[tuple[bool, float]]:
        return [(r.sufficient, p_sufficient(readings[r.id], w)) for r in rs]

    (cut, _), weight = max(((fit_cut(units(fit, w)), w) for w in WEIGHTS), key=lambda f: f[0][1])
    alone = units(rep, weight)
    # the cascade: a settled question gets P(sufficient) 0 (insufficient at any cut)
    staged = [(g, 0.0 if best[r.id] < edge else p) for (g, p), r in zip(alone, rep, strict=True)]
    sent = sum(best[r.id] >= edge for r in rep)
    out = []
    answerable = sum(g for g, _ in alone)
    for name, us, calls in (
        ("local:qwen mode=score alone", alone, len(rep)),
        ("cascade:local:minilm,local:qwen", staged, sent),
    ):
        f1 = m.bootstrap_ci(us, lambda s, c=cut: f1_insufficient(s, c), samples=samples)
        ans = m.bootstrap_ci(
            [u for u in us if u[0]],
            lambda s, c=cut: answerable_insufficient(s, c),
            samples=samples,
        )
        out.append(
            f"| half {fit_h} → half {rep_h} | {len(rep)} ({answerable}) | {name} | {fmt(f1)} | "
            f"{fmt(ans)} | {calls} ({calls / len(rep):.0%}) |"
        )
    return out


def _write_band(edge: float, questions: int, answerable: float) -> None:
    bands = json.loads(BAND.read_text(encoding="utf-8"))
    entry = bands["local:minilm"]
    entry["none_relevant_below"] = round(edge, 4)
    entry["fit"]["none_relevant_below"] = {
        "dataset": "clapnq dev",
        "questions": questions,
        "rule": f"the largest edge that settles at most {MAX_SETTLED_ANSWERABLE:.0%} of the "
        "answerable questions (no passage scoring as much)",
        "answerable_settled": round(answerable, 4),
        "script": "bench/sufficiency_cascade.py",
    }
    BAND.write_text(json.dumps(bands, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
