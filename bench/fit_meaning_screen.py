"""Fit the two constants of the candidate second reader of the screen (``bench/_meaning_screen.py``)
on the tuned phrasings and the LLMJudge passages, and say whether its constants match.

    python bench/fit_meaning_screen.py [--data ../shared/data] [--no-write]

- The gate, ``GRADER_STEMS``: the stems of the tuned exemplar sentences that fewer than
  ``--stem-share`` (0.5%) of the sentences of LLMJudge's judged passages hold.
- The threshold, ``THRESHOLD``: the least cosine on a 0.05 grid at which at most
  ``--fp-rate`` (0.2%) of LLMJudge's judged passages have a gated sentence that close to an
  exemplar.

Nothing here reads TREC DL 2019 or a held-out phrasing: ``bench/injection_screen.py``
measures the result on those, out of set. The leave-one-record-out column says how a tuned
phrasing fares against the exemplars of the *other* records, a first look at rephrasing
within the fit.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _meaning_screen as meaning
from _meaning_screen import cut_sentences
from _report import write_section
from injection_screen import load

ROOT = Path(__file__).resolve().parent.parent
GRID = [round(0.35 + 0.05 * i, 2) for i in range(9)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--stem-share", type=float, default=0.005)
    parser.add_argument("--fp-rate", type=float, default=0.002)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()

    _, qrels, texts = load(args.data, "llmjudge")
    pids = sorted({pid for judged in qrels.values() for pid in judged if pid in texts})
    sentences = [[texts[p][a:b] for a, b in cut_sentences(texts[p])] for p in pids]
    flat = [s for group in sentences for s in group]
    df = Counter(stem for s in flat for stem in meaning.stems(s))
    table = meaning.exemplars()
    stems = sorted(
        {
            stem
            for e in table
            for stem in meaning.stems(e.text)
            if df[stem] < args.stem_share * len(flat)
        }
    )

    gate = frozenset(stems)
    passes = [
        [s for s in group if len(s.split()) >= meaning.MIN_WORDS and gate & meaning.stems(s)]
        for group in sentences
    ]
    gated_share = sum(map(len, passes)) / len(flat)
    scored = meaning.nearest([s for group in passes for s in group])
    best, at = [], 0
    for group in passes:
        best.append(max((c for c, _ in scored[at : at + len(group)]), default=0.0))
        at += len(group)
    best_arr = np.array(best)
    fp = {t: float((best_arr >= t).mean()) for t in GRID}
    threshold = next(t for t in GRID if fp[t] <= args.fp_rate)

    # leave one record out: each tuned exemplar sentence against the others' records
    vectors = meaning._encoder_and_matrix()[1]  # the exemplars' embeddings, in table order
    cos = vectors @ vectors.T
    records = np.array([e.record for e in table])
    loo = [float(cos[i][records != records[i]].max()) for i in range(len(table))]

    shipped_ok = gate == meaning.GRADER_STEMS and threshold == meaning.THRESHOLD
    print(f"{len(pids)} passages, {len(flat)} sentences, gate passes {gated_share:.1%}")
    print("stems", " ".join(stems))
    print("false positives by threshold", fp)
    print("threshold", threshold, "the reader's constants match:", shipped_ok)
    if not shipped_ok:
        print("the reader's stems differ:", sorted(gate ^ meaning.GRADER_STEMS), meaning.THRESHOLD)

    rows = [
        f"| {t:.2f} | {100 * fp[t]:.2f}% | "
        f"{100 * float(np.mean([c >= t for c in loo])):.1f}% |"
        + (" **chosen** |" if t == threshold else " |")
        for t in GRID
    ]
    body = "\n".join(
        [
            f"Fitted on the {len(table)} sentences of the suite's tuned phrasings "
            f"({len({e.record for e in table})} records of {len(meaning.EXEMPLAR_KINDS)} kinds) "
            f"and the {len(pids)} judged LLMJudge passages ({len(flat)} sentences); no TREC DL "
            "2019 passage and no held-out phrasing is read. "
            f"Gate: the {len(stems)} exemplar stems that fewer than {args.stem_share:.1%} of "
            f"the LLMJudge sentences hold; {gated_share:.1%} of those sentences pass it. "
            f"Threshold: the least on the grid with at most {args.fp_rate:.1%} of the "
            "passages flagged. The reader's constants match this fit: "
            f"{'yes' if shipped_ok else 'NO'}. "
            f"{time.perf_counter() - started:.0f} s.",
            "",
            "| cosine at least | LLMJudge passages flagged | tuned sentences within reach of "
            "another record (leave one record out) | |",
            "|---:|---:|---:|---|",
            *rows,
        ]
    )
    if not args.no_write:
        title = "Injection screen, a candidate reader by meaning: the fit"
        write_section("meaning_screen_fit", title, body)


if __name__ == "__main__":
    main()
