"""``evidex rerank``: rerank one query's passages (JSON out), or a whole TREC run (TREC out).

One query: ``evidex rerank --query TEXT --passages FILE.jsonl [-o FILE]``.
A batch: ``evidex rerank --run RUN.trec --queries queries.tsv --passages FILE.jsonl -o OUT.trec``;
each query's candidates come from the run in its rank order, the ones with a text in the
passages file are reranked, and those without one keep their run order below them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from evidex.cli._app import app, err_console, write_json, write_lines
from evidex.cli._derive import job_flags
from evidex.cli._io import RunFlags, progress, read_passages, run_flags
from evidex.cli._options import PromptOpt, passages_option, query_option, unset_option
from evidex.cli._spend import report_spend
from evidex.errors import ConfigError, InputError
from evidex.jobs.rerank import DEFINITION, RerankOptionsModel, RerankResult, rerank
from evidex.types import Passage

__all__ = [
    "RunLine",
    "descending_scores",
    "read_queries",
    "read_run",
    "rerank_command",
    "run_lines",
]


# ---------------------------------------------------------------------------- TREC files


@dataclass(frozen=True)
class RunLine:
    qid: str
    docid: str
    rank: int
    score: float


def read_run(path: str | Path) -> dict[str, list[RunLine]]:
    """A TREC run (``qid Q0 docid rank score tag``) → each query's lines in rank order."""
    run: dict[str, list[RunLine]] = {}
    for where, parts in _rows(path):
        try:
            if len(parts) != 6:
                raise ValueError
            line = RunLine(parts[0], parts[2], int(parts[3]), float(parts[4]))
        except ValueError:
            raise InputError(
                "a run line has 6 columns 'qid Q0 docid rank score tag' with an integer rank "
                f"and a numeric score, got {' '.join(parts)!r}",
                where=where,
            ) from None
        run.setdefault(line.qid, []).append(line)
    for lines in run.values():
        lines.sort(key=lambda r: (r.rank, -r.score))
    return run


def read_queries(path: str | Path) -> dict[str, str]:
    """``qid<TAB>query`` lines → ``{qid: query}``."""
    queries: dict[str, str] = {}
    for where, parts in _rows(path, sep="\t"):
        if len(parts) < 2 or not parts[1].strip():
            raise InputError("a queries line is 'qid<TAB>query text'", where=where)
        queries[parts[0].strip()] = parts[1].strip()
    return queries


def _rows(path: str | Path, sep: str | None = None) -> Iterator[tuple[str, list[str]]]:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield f"{path}:{lineno}", line.rstrip("\r").split(sep)


def run_lines(qid: str, result: RerankResult, tag: str) -> list[str]:
    """A reranked query as TREC run lines, with the model's scores (see
    :func:`descending_scores`)."""
    ranked = result.ranked_passages
    scores = descending_scores([r.relevance_score for r in ranked])
    pairs = zip(ranked, scores, strict=True)
    return [f"{qid} Q0 {r.passage_id} {r.rank} {s:.8g} {tag}" for r, s in pairs]


_STEP = 1e-4


def descending_scores(scores: Sequence[float | None]) -> list[float]:
    """The scores of a ranking, in rank order, as a TREC run needs them: strictly descending,
    since trec_eval orders a run by score, not rank. Each is the model's own score when it has
    one below the previous; a missing one (a passage past ``top_n``, a fallback) or one out of
    order (an LLM's listwise scores) is set just under the previous. With no score at all, the
    scores are ``n .. 1``."""
    known = [s for s in scores if s is not None]
    if not known:
        return [float(len(scores) - i) for i in range(len(scores))]
    out: list[float] = []
    for score in scores:
        if score is None or (out and score >= out[-1]):
            score = (out[-1] if out else max(known)) - (_STEP if out else 0.0)
        out.append(float(score))
    return out


# ---------------------------------------------------------------------------- the command


@app.command("rerank")
@run_flags()
@job_flags(DEFINITION)
def rerank_command(
    passages: Annotated[
        str,
        passages_option(
            'Candidate passages, one JSON object a line: {"passage_id": ..., "text": ...} '
            "(id or pid is accepted for passage_id; rank and score give the retrieval order). "
            "With --run: the texts of the run's documents."
        ),
    ],
    flags: RunFlags,
    options: RerankOptionsModel,
    query: Annotated[str | None, query_option("The query.")] = None,
    run: Annotated[
        Path | None,
        unset_option("--run", metavar="RUN.trec", help="Batch form: a TREC run file."),
    ] = None,
    queries: Annotated[
        Path | None,
        unset_option("--queries", metavar="queries.tsv", help="Batch form: `qid<TAB>query` lines."),
    ] = None,
    prompt: PromptOpt = None,
) -> None:
    """Rerank candidate passages by relevance, with a justification per position.

    One query prints JSON: ranked_passages (rank, passage_id, relevance_score, justification,
    source), the strategy, events, metrics and review_item_ids; --top-k cuts the printed list.
    With --run and --queries it reranks every query of the run and writes a TREC run. A
    ranking that could not be judged keeps the retrieval order with source "fallback" and a
    review item; the exit code is still 0.
    """
    if (run is None) != (queries is None):
        raise ConfigError("the batch form needs both --run and --queries")
    if run is not None and query is not None:
        raise ConfigError("give either --query (one query) or --run/--queries (a batch)")
    if run is None and (query is None or not query.strip()):
        raise InputError("the query is empty", where="--query")
    items = read_passages(passages)
    with flags.job("rerank") as job:

        def one(text: str, candidates: Sequence[Passage]) -> RerankResult:
            return rerank(text, candidates, **options.values(), prompt=prompt, **job)

        if run is not None and queries is not None:
            _batch(run, queries, items, one, flags.output)
            return
        result = one(query or "", items)
    write_json(DEFINITION.respond(result), flags.output)
    _warn_fallback([result])
    report_spend([result])


def _batch(
    run_path: Path,
    queries_path: Path,
    items: Sequence[Passage],
    one: Callable[[str, Sequence[Passage]], RerankResult],
    output: Path | None,
) -> None:
    run = read_run(run_path)
    queries = read_queries(queries_path)
    unknown = sorted(q for q in run if q not in queries)
    if unknown:
        raise InputError(
            f"queries {', '.join(unknown[:5])} of the run have no text in {queries_path}",
            where=str(run_path),
        )
    texts = {p.passage_id: p for p in items}
    results: list[RerankResult] = []
    missing = 0
    lines: list[str] = []
    with progress(len(run), "rerank", "queries") as on_progress:
        for done, (qid, entries) in enumerate(run.items(), 1):
            candidates = [
                texts[e.docid].model_copy(update={"rank": e.rank, "score": e.score})
                for e in entries
                if e.docid in texts
            ]
            without = [e for e in entries if e.docid not in texts]
            missing += len(without)
            if candidates:
                result = one(queries[qid], candidates)
                results.append(result)
                lines += run_lines(qid, result, f"evidex-{result.strategy}")
            start = len(candidates)
            mine = lines[len(lines) - start :]
            floor = min((float(line.split()[4]) for line in mine), default=0.0)
            lines += [
                f"{qid} Q0 {e.docid} {start + i} {floor - i:.8g} no-text"
                for i, e in enumerate(without, 1)
            ]
            if on_progress is not None:
                on_progress(done, len(run))
    write_lines(lines, output)
    err_console.print(
        f"reranked {len(results)} queries; {missing} run entries had no text and kept their "
        "run order below the reranked ones",
        highlight=False,
    )
    _warn_fallback(results)
    report_spend(results)


def _warn_fallback(results: Sequence[RerankResult]) -> None:
    """Say on stderr when a ranking fell back: exit code 0 must not hide it."""
    fell = [r for r in results if r.source == "fallback"]
    if fell:
        ids = [i for r in fell for i in r.review_item_ids]
        err_console.print(
            f"[yellow]warning:[/] {len(fell)} ranking(s) fell back to retrieval order "
            f"({fell[0].reason}); review items {', '.join(map(str, ids))}. "
            f"See: evidex log --run {fell[0].run_id}",
            highlight=False,
        )
    ungrounded = [r for r in results if r.grounding is not None and not r.grounding.answered]
    if ungrounded:
        err_console.print(
            f"[yellow]warning:[/] the top-k of {len(ungrounded)} query(ies) do not answer it "
            f"({ungrounded[0].grounding.reason}); routed to review. "  # type: ignore[union-attr]
            f"See: evidex review list --job rerank",
            highlight=False,
        )
