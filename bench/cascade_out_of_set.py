"""Cascade rules on TREC DL 2019 measured out of set: fit on one half of the queries, measure
on the other, both ways round, with bootstrap intervals over the held-out queries.

    python bench/cascade_out_of_set.py DATA_DIR [--cache reports/cascade/minilm_dl19.json]

The LLM stage is DeepSeek-V3's recorded UMBRELA grades (``umbrela_dsv3.qrels``), the cheap
stage ``local:minilm`` (scores from ``bench/_minilm_cache.py``, tiers by its shipped cut
points). A pair inside the band takes the LLM's grade, a pair outside the encoder's: the
arithmetic the cascade judge does (``bench/cascade_dl19.py`` runs the judge itself). Whole
queries are left out, never pairs. Rules:

- ``llm``: every pair sent.
- ``shipped``: the shipped band (fitted on LLMJudge dev).
- ``shipped low, open above``: the shipped band's low edge, upper edge +inf (not fitted here).
- ``band``: the two-sided band of ``evidex calibrate --budget 0.5`` before this rule.
- ``low-only``: the upper edge fixed at +inf, the low bound fitted (``fit_band(...,
  open_above=True)``, budget 0.5 at the 95th percentile of a query bootstrap).
- ``audit``: the two-sided band fitted at budget 0.5 minus the audit share; during the run a
  random ``AUDIT`` share of the settled pairs goes to the LLM as well; when the encoder's
  agreement with the LLM on the audited pairs of one side falls below what it was on the
  fitting half (by more than ``AUDIT_SLACK``), that side is widened (its settled pairs nearest
  the band are sent) as far as the budget allows.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _minilm_cache import cached_scores, key
from _report import write_section
from evidex.evaluate.calibration import fit_band
from evidex.evaluate.datasets import trec_dl_tier
from evidex.judges.cascade import load_band
from evidex.judges.minilm import MiniLMJudge
from evidex.types import DEFAULT_TIERS

BUDGET = 0.5
RESAMPLES = 200
BOOT = 1000
AUDIT = 0.05
AUDIT_SLACK = 0.10
N = len(DEFAULT_TIERS.names)

Ints = npt.NDArray[np.int_]


@dataclass
class Data:
    scores: npt.NDArray[np.float64]
    cheap: Ints
    llm: Ints
    gold: Ints
    groups: list[str]


def load(data: Path, cache: Path) -> Data:
    records = trec_dl_tier(data)
    scores = cached_scores(records, cache)
    names = list(DEFAULT_TIERS.names)
    by_grade = {r.grade: r.tier for r in records}
    llm_grades = {}
    for line in (data / "umbrela_dsv3.qrels").read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4:
            llm_grades[(parts[0], parts[2])] = int(parts[3])
    cuts = MiniLMJudge().thresholds.for_tiers(N)
    values = np.array([scores[key(r)] for r in records])
    cheap = np.array([next((i for i, c in enumerate(cuts) if s >= c), len(cuts)) for s in values])
    llm = np.array([names.index(by_grade[llm_grades[(r.group, r.passage_id)]]) for r in records])
    gold = np.array([names.index(r.tier) for r in records])
    return Data(values, cheap, llm, gold, [r.group for r in records])


def kappa(gold: Ints, pred: Ints) -> float:
    c = np.zeros((N, N))
    np.add.at(c, (gold, pred), 1)
    return _kappa_of(c)


def _kappa_of(c: npt.NDArray[np.float64]) -> float:
    n = c.sum()
    po = np.trace(c) / n
    pe = float((c.sum(0) * c.sum(1)).sum()) / n**2
    return float((po - pe) / (1 - pe))


def halves(groups: Sequence[str], seed: int = 0) -> tuple[set[str], set[str]]:
    names = sorted(set(groups))
    order = np.random.default_rng(seed).permutation(len(names))
    first = {names[i] for i in order[: len(names) // 2]}
    return first, set(names) - first


def interval(gold: Ints, pred: Ints, llm: Ints, groups: Sequence[str]) -> dict[str, float]:
    """Kappa and kappa − LLM kappa with 95% intervals over a bootstrap of the queries."""
    names, index = np.unique(np.asarray(groups), return_inverse=True)
    per_q = np.zeros((len(names), 2, N, N))
    for which, labels in ((0, pred), (1, llm)):
        np.add.at(per_q, (index, np.full_like(index, which), gold, labels), 1)
    rng = np.random.default_rng(1)
    ks, ds = [], []
    for _ in range(BOOT):
        w = np.bincount(rng.integers(0, len(names), len(names)), minlength=len(names))
        c = np.tensordot(w, per_q, axes=1)
        k, k_llm = _kappa_of(c[0]), _kappa_of(c[1])
        ks.append(k)
        ds.append(k - k_llm)
    return {
        "kappa": kappa(gold, pred),
        "delta": kappa(gold, pred) - kappa(gold, llm),
        "k_lo": float(np.quantile(ks, 0.025)),
        "k_hi": float(np.quantile(ks, 0.975)),
        "d_lo": float(np.quantile(ds, 0.025)),
        "d_hi": float(np.quantile(ds, 0.975)),
    }


def _fit(d: Data, idx: Ints, budget: float, open_above: bool) -> tuple[float, float]:
    f = fit_band(
        d.scores[idx].tolist(),
        d.cheap[idx].tolist(),
        d.llm[idx].tolist(),
        d.gold[idx].tolist(),
        N,
        budget=budget,
        groups=[d.groups[i] for i in idx],
        resamples=RESAMPLES,
        open_above=open_above,
    )
    return float(f["low"]), float(f["high"])


def run_rule(rule: str, d: Data, fit: Ints, test: Ints) -> tuple[Ints, float, dict[str, Any]]:
    """The predictions on ``test`` of ``rule`` fitted on ``fit``, the share sent, notes."""
    s = d.scores[test]
    if rule == "llm":
        return d.llm[test], 1.0, {}
    if rule in ("shipped", "shipped low, open above"):
        band = load_band(None, "local:minilm")
        if band is None:
            raise SystemExit("no shipped band for local:minilm")
        low, high = band.low, band.high if rule == "shipped" else np.inf
    elif rule in ("band", "low-only"):
        low, high = _fit(d, fit, BUDGET, rule == "low-only")
    else:
        return _audit(d, fit, test)
    inside = (s >= low) & (s < high)
    pred = np.where(inside, d.llm[test], d.cheap[test])
    return pred, float(inside.mean()), {"low": low, "high": high}


def _audit(d: Data, fit: Ints, test: Ints) -> tuple[Ints, float, dict[str, Any]]:
    low, high = _fit(d, fit, BUDGET - AUDIT, False)
    fs = d.scores[fit]
    expected = {}
    for side, mask in (("above", fs >= high), ("below", fs < low)):
        agree = d.cheap[fit][mask] == d.llm[fit][mask]
        expected[side] = float(agree.mean()) if mask.any() else 1.0
    s = d.scores[test]
    sent = (s >= low) & (s < high)
    settled = np.flatnonzero(~sent)
    rng = np.random.default_rng(7)
    audited = rng.choice(settled, size=min(len(settled), round(AUDIT * len(s))), replace=False)
    sent[audited] = True
    found: dict[str, Any] = {"low": low, "high": high, "audited": len(audited) / len(s)}
    for side, mask in (("above", s >= high), ("below", s < low)):
        picked = audited[mask[audited]]
        agree = float((d.cheap[test][picked] == d.llm[test][picked]).mean()) if len(picked) else 1.0
        found[f"agree_{side}"] = agree
        found[f"expected_{side}"] = expected[side]
        if agree < expected[side] - AUDIT_SLACK:
            room = int(BUDGET * len(s)) - int(sent.sum())
            order = np.flatnonzero(mask & ~sent)
            order = order[np.argsort(s[order] if side == "above" else -s[order])]
            sent[order[: max(room, 0)]] = True
            found[f"widened_{side}"] = int(min(max(room, 0), len(order)))
    pred = np.where(sent, d.llm[test], d.cheap[test])
    return pred, float(sent.mean()), found


RULES = ("llm", "shipped", "shipped low, open above", "band", "low-only", "audit")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--cache", type=Path, default=Path("reports/cascade/minilm_dl19.json"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    d = load(args.data, args.cache)
    a, b = halves(d.groups, args.seed)
    in_a = np.array([g in a for g in d.groups])
    folds = {"fit A, measure B": (np.flatnonzero(in_a), np.flatnonzero(~in_a))}
    folds["fit B, measure A"] = (np.flatnonzero(~in_a), np.flatnonzero(in_a))
    rows = []
    pooled: dict[str, tuple[list[Ints], list[int], list[Ints]]] = {}
    for rule in RULES:
        preds, sent, tests = [], 0.0, []
        for name, (fit, test) in folds.items():
            pred, share, notes = run_rule(rule, d, fit, test)
            st = interval(d.gold[test], pred, d.llm[test], [d.groups[i] for i in test])
            rows.append((rule, name, st, share, notes))
            preds.append(pred)
            tests.append(test)
            sent += share * len(test)
        pooled[rule] = (preds, [int(sent)], tests)
    lines = [
        "| rule | direction | kappa (95% CI) | kappa − LLM (95% CI) | sent | notes |",
        "|---|---|---|---|---|---|",
    ]
    for rule, name, st, share, notes in rows:
        note = ", ".join(f"{k} {v:.3g}" for k, v in notes.items())
        lines.append(
            f"| {rule} | {name} | {st['kappa']:.3f} ({st['k_lo']:.3f}–{st['k_hi']:.3f}) | "
            f"{st['delta']:+.3f} ({st['d_lo']:+.3f}–{st['d_hi']:+.3f}) | {share:.1%} | {note} |"
        )
    for rule, (preds, sent_n, tests) in pooled.items():
        idx = np.concatenate(tests)
        st = interval(d.gold[idx], np.concatenate(preds), d.llm[idx], [d.groups[i] for i in idx])
        lines.append(
            f"| {rule} | both halves pooled (each by the other's fit) | {st['kappa']:.3f} "
            f"({st['k_lo']:.3f}–{st['k_hi']:.3f}) | {st['delta']:+.3f} "
            f"({st['d_lo']:+.3f}–{st['d_hi']:+.3f}) | {sent_n[0] / len(idx):.1%} | |"
        )
    verdict = []
    for rule in RULES[1:]:
        mine = [(st, share) for r, _, st, share, _ in rows if r == rule]
        ok = all(st["delta"] >= -0.02 and share <= BUDGET for st, share in mine)
        worst = min(st["delta"] for st, _ in mine)
        verdict.append(
            f"- `{rule}`: {'meets' if ok else 'misses'} the goal (within 0.02 of the LLM with "
            f"at most {BUDGET:.0%} sent, in both directions); worst direction {worst:+.3f}, "
            f"largest share sent {max(share for _, share in mine):.1%}"
        )
    body = (
        f"TREC DL 2019, {len(d.gold)} judged pairs, {len(set(d.groups))} queries split into two "
        f"seeded halves (seed {args.seed}; A has {len(a)} queries, B {len(b)}); every rule is "
        "fitted on one half and measured on the other, so no query is in both. LLM stage: "
        "DeepSeek-V3's recorded UMBRELA grades; cheap stage: `local:minilm` with its shipped "
        f"cut points. Budget {BUDGET:.0%} (95th percentile of {RESAMPLES} query resamples of "
        f"the fitting half); audit share {AUDIT:.0%}, slack {AUDIT_SLACK:.2f}. Kappa: Cohen's, "
        f"four grades, unweighted, against NIST; intervals: 95%, {BOOT} bootstrap resamples "
        "of the held-out queries (the difference resampled jointly with the LLM's).\n\n"
        + "\n".join(lines)
        + "\n\n"
        + "\n".join(verdict)
    )
    print(body)
    write_section("cascade_out_of_set", "Cascade rules out of set (TREC DL 2019)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
