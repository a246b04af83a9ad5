"""Converters from public benchmark layouts to the golden formats of :mod:`.golden`.

Each reader takes the folder of one data set laid out as in the project's shared data (see
``docs/evaluation.md``) and returns golden records; nothing is downloaded.

Which job reads which layout is its evaluator's (``layouts``: a
:class:`~evidex.evaluate.layouts.Layout` each, naming the reader below).

- **LLMJudge** (``queries.tsv``, ``qrels_dev.txt``, ``passages.jsonl`` with ``docid``/``doc``)
  → tier pairs. Grades 0-3 map to the default tiers: 3 directly-supporting,
  2 contextually-relevant, 1 tangentially-related, 0 irrelevant (:func:`tiers_from_grades`).
- **TREC DL 2019** (``queries.tsv``, ``qrels.txt``, ``passages.jsonl`` with ``pid``/``text``,
  ``bm25_top100.run``) → tier pairs (judged pairs) or rerank queries. For rerank the pool is
  named: ``"run"`` keeps the BM25 candidates that have text (the others are all unjudged),
  ``"judged"`` takes every judged passage in qrels order.
- **WiCE** (``oracle_chunks/dev.jsonl``) → audit items: the claim is the answer and its only
  gold claim; the chunk's sentences are the passages (``s<sentence index>``); labels map
  supported → fully_supported, partially_supported → partially_supported, not_supported →
  unsupported.
- **SciFact** (``claims_train.jsonl``, ``corpus.jsonl``) → classify items: the claim is the
  input, the cited abstracts' sentences are the passages (``<doc_id>:<index>``), the label is
  SUPPORT / CONTRADICT, or NOT_ENOUGH_INFO when the claim has no evidence; the rationale
  sentences are the gold citations. :data:`SCIFACT_TAXONOMY` defines the three labels for the
  judge and :data:`SCIFACT_CONSTRAINTS` says what the input and the passages are.

:func:`layout_job` and :func:`load_layout` recognise these folders, so ``evidex eval JOB
--golden FOLDER`` takes a data set folder as well as a golden JSONL file.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from evidex.errors import ConfigError, InputError
from evidex.evaluate.golden import (
    AuditClaim,
    AuditGolden,
    ClassifyGolden,
    RerankGolden,
    TierGolden,
    load_qrels,
    load_run,
    read_jsonl,
    tiers_from_grades,
)
from evidex.evaluate.layouts import Layout, layout_job
from evidex.taxonomy import Taxonomy
from evidex.types import DEFAULT_TIERS, Passage, TierScheme

__all__ = [
    "AUDIT_TO_WICE",
    "SCIFACT_CONSTRAINTS",
    "SCIFACT_LABELS",
    "SCIFACT_TAXONOMY",
    "WICE_LABELS",
    "WICE_TO_AUDIT",
    "layout_job",
    "llmjudge_tier",
    "load_layout",
    "scheme_of",
    "scifact_classify",
    "trec_dl_rerank",
    "trec_dl_tier",
    "wice_audit",
]

WICE_TO_AUDIT = {
    "supported": "fully_supported",
    "partially_supported": "partially_supported",
    "not_supported": "unsupported",
}
WICE_LABELS = ("supported", "partially_supported", "not_supported")
"""WiCE's three classes: the scale the audit evaluator scores claims on."""
AUDIT_TO_WICE = {
    "fully_supported": "supported",
    "partially_supported": "partially_supported",
    "inferred": "not_supported",
    "unsupported": "not_supported",
}
"""The audit's four claim classes on WiCE's three. An inferred claim is not stated by the
context, so against a gold standard of "does the evidence state it" it is not supported."""

SCIFACT_LABELS = ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO")
SCIFACT_TAXONOMY = Taxonomy.parse(
    {
        "SUPPORT": "The passages report findings showing that the claim is true.",
        "CONTRADICT": "The passages report findings showing that the claim is false, or "
        "state the opposite of the claim.",
        "NOT_ENOUGH_INFO": "The passages neither show the claim true nor show it false: they "
        "are about a neighbouring question or do not report the needed result.",
    }
)
"""SciFact's labels with definitions a judge can decide by."""
SCIFACT_CONSTRAINTS = (
    "The INPUT is a scientific claim and the passages are sentences of the abstracts it cites.",
    "For NOT_ENOUGH_INFO, quote the sentence that comes closest to the claim.",
)
"""Extra prompt rules for SciFact: what the input is, and what to quote when abstaining."""


def load_layout(root: str | Path, job: str, extra: Mapping[str, Any] | None = None) -> list[Any]:
    """Golden records of ``job`` from a data set folder (see the module docstring).

    The job's evaluator says which layouts it reads (its ``layouts``), tried in its order;
    ``extra`` carries the evaluation's job-specific options (tier: ``tiers``, a
    :class:`TierScheme`; rerank: ``pool``, ``run`` or ``judged``). A folder without a layout
    the job reads is a :class:`ConfigError` naming the files it looked for.
    """
    from evidex.evaluate.registry import get_evaluator

    root = Path(root)
    layouts: tuple[Layout, ...] = tuple(getattr(get_evaluator(job), "layouts", ()))
    layout = next((one for one in layouts if one.holds(root)), None)
    if layout is None:
        wanted = " or ".join(one.describe() for one in layouts) or "a golden JSONL file"
        raise ConfigError(
            f"{root} is a folder without the {job} data layout; expected {wanted} "
            "(or give a golden JSONL file)"
        )
    records = layout.read(root, extra or {})
    if not records:
        raise InputError("the data set folder yields no golden items", where=str(root))
    return records


def scheme_of(extra: Mapping[str, Any]) -> TierScheme:
    """The tier scheme of an evaluation's options (``extra["tiers"]``), else the default."""
    scheme = extra.get("tiers")
    return scheme if isinstance(scheme, TierScheme) else DEFAULT_TIERS


def llmjudge_tier(root: str | Path, scheme: TierScheme = DEFAULT_TIERS) -> list[TierGolden]:
    """LLMJudge dev pairs as tier golden records (grades kept in ``grade``)."""
    return _graded_folder(Path(root), "qrels_dev.txt", ("docid", "doc"), scheme)


def trec_dl_tier(root: str | Path, scheme: TierScheme = DEFAULT_TIERS) -> list[TierGolden]:
    """TREC DL 2019 judged pairs as tier golden records."""
    return _graded_folder(Path(root), "qrels.txt", ("pid", "text"), scheme)


def trec_dl_rerank(
    root: str | Path, *, pool: Literal["run", "judged"] = "run"
) -> list[RerankGolden]:
    """TREC DL 2019 queries with candidates from the BM25 run (``pool="run"``, those with
    text, in BM25 order) or from the judged pool (``pool="judged"``)."""
    root = Path(root)
    queries = _queries(root / "queries.tsv")
    qrels = load_qrels(root / "qrels.txt")
    texts = _texts(root / "passages.jsonl", "pid", "text")
    run = load_run(root / "bm25_top100.run") if pool == "run" else {}
    records = []
    for qid, grades in qrels.items():
        if qid not in queries:
            continue
        if pool == "run":
            ranked = sorted(run.get(qid, {}).items(), key=lambda kv: (-kv[1], kv[0]))
            ids = [pid for pid, _ in ranked if pid in texts]
        else:
            ids = [pid for pid in grades if pid in texts]
        if not ids:
            continue
        candidates = [
            Passage(passage_id=pid, text=texts[pid], rank=rank) for rank, pid in enumerate(ids, 1)
        ]
        records.append(
            RerankGolden(query_id=qid, query=queries[qid], candidates=candidates, grades=grades)
        )
    return records


def wice_audit(root: str | Path) -> list[AuditGolden]:
    """WiCE oracle chunks as audit items (one per chunk; three chunks per claim)."""
    path = Path(root) / "oracle_chunks" / "dev.jsonl"
    records = []
    counters: dict[str, int] = {}
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        meta = _field(row, "meta", dict, where)
        label = _field(row, "label", str, where)
        if label not in WICE_TO_AUDIT:
            raise InputError(f"unknown WiCE label {label!r}", where=where)
        sentences = _field(row, "evidence", list, where)
        indices = list(meta.get("chunk_idx") or range(len(sentences)))
        if len(indices) != len(sentences):
            raise InputError("meta.chunk_idx and evidence differ in length", where=where)
        passages = [
            Passage(passage_id=f"s{i}", text=text)
            for i, text in zip(indices, sentences, strict=True)
            if str(text).strip()
        ]
        claim_id = str(meta.get("id", lineno))
        counters[claim_id] = counters.get(claim_id, 0) + 1
        claim = _field(row, "claim", str, where)
        records.append(
            AuditGolden(
                id=f"{claim_id}#{counters[claim_id]}",
                answer=claim,
                passages=passages,
                claims=[
                    AuditClaim(
                        claim_text=claim,
                        classification=WICE_TO_AUDIT[label],
                        supporting_context_ids=[f"s{i}" for i in meta.get("oracle_idx", [])],
                    )
                ],
            )
        )
    return records


def scifact_classify(root: str | Path) -> list[ClassifyGolden]:
    """SciFact claims as classify items over the sentences of their cited abstracts."""
    root = Path(root)
    corpus: dict[str, list[str]] = {}
    for lineno, row in read_jsonl(root / "corpus.jsonl"):
        corpus[str(row.get("doc_id"))] = _field(
            row, "abstract", list, f"{root / 'corpus.jsonl'}:{lineno}"
        )
    records = []
    path = root / "claims_train.jsonl"
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        evidence: dict[str, Any] = row.get("evidence") or {}
        labels = sorted({e["label"] for sets in evidence.values() for e in sets})
        rationale = [
            f"{doc}:{i}" for doc, sets in evidence.items() for e in sets for i in e["sentences"]
        ]
        passages = [
            Passage(passage_id=f"{doc}:{i}", text=sentence)
            for doc in map(str, row.get("cited_doc_ids") or [])
            for i, sentence in enumerate(corpus.get(doc, []))
            if sentence.strip()
        ]
        if not passages:
            raise InputError("the claim cites no abstract found in corpus.jsonl", where=where)
        records.append(
            ClassifyGolden(
                id=str(row.get("id")),
                input=_field(row, "claim", str, where),
                passages=passages,
                labels=labels or ["NOT_ENOUGH_INFO"],
                rationale_ids=sorted(set(rationale)),
            )
        )
    return records


# ---------------------------------------------------------------------- helpers


def _graded_folder(
    root: Path, qrels: str, fields: tuple[str, str], scheme: TierScheme
) -> list[TierGolden]:
    """The graded pairs of a folder with ``queries.tsv``, the qrels file ``qrels`` and
    ``passages.jsonl`` (``fields``: the id and the text key of a passage line)."""
    return _graded_pairs(
        _queries(root / "queries.tsv"),
        load_qrels(root / qrels),
        _texts(root / "passages.jsonl", *fields),
        scheme,
    )


def _graded_pairs(
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    texts: dict[str, str],
    scheme: TierScheme,
) -> list[TierGolden]:
    records = []
    for qid, grades in qrels.items():
        if qid not in queries:
            continue
        for pid, grade in grades.items():
            text = texts.get(pid, "")
            if not text.strip():
                continue
            records.append(
                TierGolden(
                    query_id=qid,
                    query=queries[qid],
                    passage_id=pid,
                    text=text,
                    tier=tiers_from_grades(grade, scheme),
                    grade=grade,
                )
            )
    return records


def _queries(path: Path) -> dict[str, str]:
    """``qid<TAB>query`` lines."""
    queries = {}
    for lineno, row in _tsv(path):
        if len(row) < 2 or not row[1].strip():
            raise InputError("a query line has 'qid<TAB>query'", where=f"{path}:{lineno}")
        queries[row[0].strip()] = row[1].strip()
    return queries


def _tsv(path: Path) -> Iterator[tuple[int, list[str]]]:
    try:
        handle = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    with handle:
        for lineno, row in enumerate(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE), 1):
            if row and any(cell.strip() for cell in row):
                yield lineno, row


def _texts(path: Path, id_field: str, text_field: str) -> dict[str, str]:
    texts = {}
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        texts[str(_field(row, id_field, (str, int), where))] = _field(row, text_field, str, where)
    return texts


def _field(row: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = row.get(name)
    if not isinstance(value, kind):
        raise InputError(f"field {name!r} is missing or has the wrong type", where=where)
    return value
