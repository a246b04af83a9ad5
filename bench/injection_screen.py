"""The injection screen's detection rate on the attack suite and its false positives on real
relevant passages.

    python bench/injection_screen.py [--data ../shared/data] [--attacked 200] [--no-write]

- False positives: every passage NIST graded 2 or 3 (highly or perfectly relevant), screened
  with its query, on TREC DL 2019 (43 queries) and on the LLMJudge dev split (25 queries).
  A passage counts once, whatever it was flagged for. Graded-0 passages are screened too.
- Detection: every record of the suite (``evidex._attacks``) applied to irrelevant (grade 0)
  TREC DL 2019 passages, one passage per query drawn with a fixed seed, stuffing templates
  filled from that query. An attack counts as detected when the screen reports one of the
  suspicion kinds the record expects; "any flag" counts any suspicion at all. Reported for
  the tuned phrasings and, apart, for the held-out ones (written after the screen's patterns
  were fixed, and not used to change them).

The screen's patterns and stuffing thresholds were tuned by looking at the LLMJudge passages
and the tuned phrasings; TREC DL 2019's relevant passages are the out-of-tuning measure.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from evidex._attacks import Attack, attack_suite
from evidex._screening import screen
from evidex.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section

ROOT = Path(__file__).resolve().parent.parent


def read_queries(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            qid, text = line.split("\t", 1)
            out[qid] = text
    return out


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4:
            out[parts[0]][parts[2]] = int(parts[3])
    return out


def read_texts(path: Path, id_key: str, text_key: str) -> dict[str, str]:
    out = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                out[str(row[id_key])] = row[text_key]
    return out


def load(data: Path, name: str) -> tuple[dict[str, str], dict[str, dict[str, int]], dict[str, str]]:
    if name == "trec-dl-2019":
        root = data / name
        return (
            read_queries(root / "queries.tsv"),
            read_qrels(root / "qrels.txt"),
            read_texts(root / "passages.jsonl", "pid", "text"),
        )
    root = data / "llmjudge"
    return (
        read_queries(root / "queries.tsv"),
        read_qrels(root / "qrels_dev.txt"),
        read_texts(root / "passages.jsonl", "docid", "doc"),
    )


def false_positives(
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    texts: dict[str, str],
    grades: set[int],
) -> tuple[int, int, Counter[str], list[tuple[str, str, str]]]:
    flagged, total = 0, 0
    rules: Counter[str] = Counter()
    examples: list[tuple[str, str, str]] = []
    for qid, judged in sorted(qrels.items()):
        if qid not in queries:
            continue
        for pid, grade in sorted(judged.items()):
            if grade not in grades or pid not in texts:
                continue
            total += 1
            found = screen(texts[pid], query=queries[qid])
            if found:
                flagged += 1
                for s in found:
                    rules[f"{s.kind}/{s.rule}"] += 1
                s = found[0]
                examples.append(
                    (queries[qid], s.rule, texts[pid][max(0, s.start - 40) : s.end + 40])
                )
    return flagged, total, rules, examples


def detection(
    suite: tuple[Attack, ...],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    texts: dict[str, str],
    per_attack: int,
    seed: int,
) -> dict[str, dict[str, list[int]]]:
    """kind -> group (:func:`group`) -> [expected kind found, any flag, total]."""
    rng = random.Random(seed)
    pool = [
        (qid, pid)
        for qid, judged in sorted(qrels.items())
        if qid in queries
        for pid, grade in sorted(judged.items())
        if grade == 0 and pid in texts
    ]
    by_query: dict[str, list[str]] = defaultdict(list)
    for qid, pid in pool:
        by_query[qid].append(pid)
    qids = sorted(by_query)
    out: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for attack in suite:
        for n in range(per_attack):
            qid = qids[n % len(qids)]
            pid = rng.choice(by_query[qid])
            clean = Passage(passage_id=pid, text=texts[pid])
            hit = attack.apply(clean, queries[qid])
            found = screen(hit.text, hit.title, hit.url, queries[qid])
            cell = out[attack.kind][group(attack)]
            cell[0] += any(s.kind in attack.expect for s in found)
            cell[1] += bool(found)
            cell[2] += 1
            total = out["(all)"][group(attack)]
            total[0] += any(s.kind in attack.expect for s in found)
            total[1] += bool(found)
            total[2] += 1
    return out


GROUPS = ("tune", "heldout", "public")


def group(attack: Attack) -> str:
    """Tuned, held out of the suite file, or the frozen public held-out set."""
    return "public" if attack.collection == "public_heldout" else attack.split


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--attacked", type=int, default=43, help="passages per attack record")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--show", type=int, default=0, help="print this many false positives")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    started = time.perf_counter()
    suite = attack_suite()
    lines = []
    fp_rows = []
    for name in ("trec-dl-2019", "llmjudge"):
        queries, qrels, texts = load(args.data, name)
        for label, grades in (("grade 2-3 (relevant)", {2, 3}), ("grade 0 (irrelevant)", {0})):
            flagged, total, rules, examples = false_positives(queries, qrels, texts, grades)
            fp_rows.append(
                f"| {name} | {label} | {total} | {flagged} | {pct(flagged, total)} | "
                + (", ".join(f"{r} {n}" for r, n in rules.most_common(4)) or "-")
                + " |"
            )
            print(f"{name} {label}: {flagged}/{total} flagged ({pct(flagged, total)})", rules)
            for example in examples[: args.show]:
                print("   ", example)
        if name == "trec-dl-2019":
            found = detection(suite, queries, qrels, texts, args.attacked, args.seed)
    kinds = [*sorted(k for k in found if k != "(all)"), "(all)"]
    det_rows = []
    for kind in kinds:
        cells = [found[kind].get(g, [0, 0, 0]) for g in GROUPS]
        det_rows.append(
            f"| {kind} | "
            + " | ".join(f"{pct(c[0], c[2])} ({c[2]}) | {pct(c[1], c[2])}" for c in cells)
            + " |"
        )
        print(kind, dict(zip(GROUPS, cells, strict=True)))
    records = Counter(group(a) for a in suite)
    lines += [
        f"Screen: `evidex._screening.screen` (patterns and stuffing thresholds, no model). Suite: "
        f"{len(suite)} phrasings, {records['tune']} tuned and {records['heldout']} held out in "
        "`src/evidex/data/attacks/suite.jsonl` (held out: written after the patterns were "
        "fixed, not used to change them), and the frozen public held-out set of "
        f"{records['public']} in `public_heldout.jsonl`. {time.perf_counter() - started:.0f} s.",
        "",
        "### False positives on real passages (screened with their query)",
        "",
        "TREC DL 2019 is out of tuning; the LLMJudge passages were read while tuning.",
        "",
        "| data | NIST grades | passages | flagged | rate | most frequent rules |",
        "|---|---|---:|---:|---:|---|",
        *fp_rows,
        "",
        "### Detection on the suite",
        "",
        f"Each phrasing applied to {args.attacked} irrelevant (grade 0) TREC DL 2019 passages, "
        f"one per query in turn (seed {args.seed}); stuffing templates filled from that query. "
        "Detected = the screen reports a kind the record expects; any flag = any suspicion. "
        "Counts of attacked passages in brackets.",
        "",
        "| attack kind | tuned: detected | tuned: any flag | held out: detected "
        "| held out: any flag | public held out: detected | public held out: any flag |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *det_rows,
    ]
    body = "\n".join(lines)
    if not args.no_write:
        write_section("injection_screen", "Injection screen: detection and false positives", body)


if __name__ == "__main__":
    main()
