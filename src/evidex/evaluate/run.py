"""Run a job over a golden set and write the report; or score predictions made elsewhere.

The run is resumable: after each group (one query for tier) its prediction rows are appended
to ``progress.jsonl`` in the output directory, and a re-run skips the groups found there. The
file starts with a fingerprint of the run (job, judge, model and prompt versions, golden file
contents, sample, seed); when it differs, the old progress is not trusted and the run starts
afresh. Judge answers are also kept by the harness cache, so even a group that was cut in the
middle costs nothing twice.

Outputs in the directory: ``predictions.jsonl`` (rescorable with ``--predictions``),
``report.json`` (``metrics`` keyed by canonical measure strings, read by ``evidex gate``),
``report.md`` and, for tier, ``confusion.png`` when matplotlib is installed.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evidex._text import sha256_hex, stable_json
from evidex.config import load_settings
from evidex.errors import InputError
from evidex.evaluate._util import jsonable, read_json_object
from evidex.evaluate.calibration import check_calibration
from evidex.evaluate.compare import check_report
from evidex.evaluate.golden import read_jsonl
from evidex.evaluate.registry import EvalOptions, Evaluator, RunsTogether, get_evaluator
from evidex.harness.ports import StorePort
from evidex.harness.runner import HarnessSettings
from evidex.jobs import resolve_judge, resolve_store, sync_of
from evidex.judging import Judge
from evidex.loaders import load_prompt

__all__ = [
    "PROGRESS_FILE",
    "aevaluate",
    "evaluate",
    "golden_digest",
    "load_records",
    "read_report",
    "sample_records",
    "score_predictions",
    "write_report",
]

logger = logging.getLogger("evidex.evaluate")

PROGRESS_FILE = "progress.jsonl"


def load_records(
    job: str, golden: str | Path, options: EvalOptions, *, sample: int | None = None
) -> tuple[Evaluator, list[Any]]:
    """The job's evaluator and its golden records, sampled when ``sample`` is given.

    ``golden`` is a golden JSONL file, or a data set folder in one of the layouts of
    :mod:`evidex.evaluate.datasets` (TREC DL, LLMJudge, WiCE, SciFact).
    """
    evaluator = get_evaluator(job)
    if Path(golden).is_dir():
        from evidex.evaluate.datasets import load_layout

        records = load_layout(golden, job, options.extra)
    else:
        records = evaluator.load(Path(golden), options)
    if sample is not None:
        records = sample_records(records, sample, options.seed)
    return evaluator, records


def sample_records(records: Sequence[Any], n: int, seed: int) -> list[Any]:
    """A seeded uniform sample of ``n`` records, kept in file order (all when ``n`` ≥ size)."""
    if n < 1:
        raise InputError(f"--sample must be at least 1, got {n}")
    if n >= len(records):
        return list(records)
    chosen = sorted(random.Random(seed).sample(range(len(records)), n))
    return [records[i] for i in chosen]


def golden_digest(golden: str | Path) -> str:
    """The hash of a golden file, or of every file in a data set folder (names and contents),
    so that a changed golden set never reuses the progress of the old one."""
    path = Path(golden)
    if not path.is_dir():
        return sha256_hex(path.read_bytes())
    parts = [
        f"{f.relative_to(path).as_posix()}:{sha256_hex(f.read_bytes())}"
        for f in sorted(path.rglob("*"))
        if f.is_file()
    ]
    return sha256_hex("\n".join(parts))


async def aevaluate(
    job: str,
    golden: str | Path,
    *,
    judge: Judge | str | None = None,
    judge_options: Mapping[str, Any] | None = None,
    store: StorePort | str | None = None,
    out_dir: str | Path = "reports/eval",
    sample: int | None = None,
    options: EvalOptions | None = None,
    calibration: str | Path | None = None,
    consistency: bool = False,
    settings: HarnessSettings | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run ``job`` with ``judge`` over the golden set, score it, and write the report files.

    Returns the report (the content of ``report.json``). ``calibration`` is a calibration file
    from ``evidex calibrate``: when its judge, model or prompt version differ from this run's,
    the report carries a warning (and it is logged).
    """
    options = options or EvalOptions()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    evaluator, records = load_records(job, golden, options, sample=sample)
    the_judge = resolve_judge(judge, job, **dict(judge_options or {}))
    the_store = resolve_store(store)
    prompt_version = _with_configured_prompt(job, evaluator.prompt_version)

    groups: dict[str, list[Any]] = {}
    for record in records:
        groups.setdefault(evaluator.group(record), []).append(record)
    fingerprint = sha256_hex(
        stable_json(
            {
                "job": job,
                "judge": the_judge.judge_id,
                "judge_options": dict(the_judge.fingerprint()),
                "prompt": prompt_version,
                "golden": golden_digest(golden),
                "sample": sample,
                "seed": options.seed,
                "extra": {k: str(v) for k, v in options.extra.items()},
            }
        )
    )[:16]
    done = _read_progress(out / PROGRESS_FILE, fingerprint)
    if on_progress is not None:
        on_progress(len(done.keys() & groups.keys()), len(groups))
    with (out / PROGRESS_FILE).open("w", encoding="utf-8") as progress:
        progress.write(json.dumps({"fingerprint": fingerprint}) + "\n")
        for name, rows in done.items():
            progress.write(json.dumps({"group": name, "rows": rows}, ensure_ascii=False) + "\n")
        progress.flush()
        pending = [name for name in groups if name not in done]
        # an evaluator may predict several groups in one run (tier, under a cascade's
        # frontier rule: the queries of a run share its budget), kept when the run lands
        together = evaluator if isinstance(evaluator, RunsTogether) else None
        size = 1 if together is None else together.run_together(the_judge, settings)
        for first in range(0, len(pending), size):
            names = pending[first : first + size]
            if together is None or size == 1:
                predicted = [
                    await evaluator.predict(
                        groups[names[0]], the_judge, the_store, options, settings
                    )
                ]
            else:
                predicted = await together.predict_together(
                    [groups[n] for n in names], the_judge, the_store, options, settings
                )
            for name, rows in zip(names, predicted, strict=True):
                done[name] = rows
                progress.write(json.dumps({"group": name, "rows": rows}, ensure_ascii=False) + "\n")
            progress.flush()
            if on_progress is not None:
                on_progress(len(done.keys() & groups.keys()), len(groups))

    rows = [row for name in groups for row in done[name]]
    _write_rows(out / "predictions.jsonl", rows)
    report = evaluator.score(records, rows, options)
    report["run"] = _run_info(
        job,
        golden,
        items=len(records),
        groups=len(groups),
        sample=sample,
        seed=options.seed,
        judge_id=the_judge.judge_id,
        model_version=the_judge.model_version,
        prompt_version=prompt_version,
    )
    warnings = list(report.get("warnings", []))
    if calibration is not None:
        warnings += check_calibration(
            calibration, the_judge.judge_id, the_judge.model_version, prompt_version
        )
    if consistency:
        check = getattr(evaluator, "consistency", None)
        if check is None:
            warnings.append(f"the {job} evaluator has no consistency check")
        else:
            report["consistency"] = await check(records, the_judge, the_store, options)
            report["metrics"]["consistency_kappa"] = report["consistency"]["kappa_min"]
    for warning in warnings:
        logger.warning("%s", warning)
    report["warnings"] = warnings
    write_report(evaluator, report, out)
    return report


evaluate = sync_of(
    aevaluate, "Run ``job`` over a golden set and write the report; see :func:`aevaluate`."
)


def score_predictions(
    job: str | None,
    predictions: str | Path,
    golden: str | Path,
    *,
    out_dir: str | Path = "reports/eval",
    options: EvalOptions | None = None,
    sample: int | None = None,
) -> dict[str, Any]:
    """Score a predictions JSONL file made elsewhere against a golden set; write the report.

    ``job`` defaults to the one the golden file's records are for. Every golden item must have
    a prediction (missing ones are an :class:`InputError` listing them). ``sample`` (with the
    seed of ``options``) picks the same golden items as :func:`evaluate` did, so a sampled
    run's ``predictions.jsonl`` can be scored again.
    """
    from evidex.evaluate.golden import detect_job

    options = options or EvalOptions()
    job = job or detect_job(golden)
    evaluator, records = load_records(job, golden, options, sample=sample)
    rows = [row for _, row in read_jsonl(predictions)]
    if not rows:
        raise InputError("the predictions file is empty", where=str(predictions))
    report = evaluator.score(records, rows, options)
    facts: dict[str, Any] = {"predictions": str(predictions), "items": len(records)}
    if sample is not None:
        facts.update(sample=sample, seed=options.seed)
    report["run"] = _run_info(job, golden, **facts)
    report.setdefault("warnings", [])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_report(evaluator, report, out)
    return report


def _run_info(job: str, golden: str | Path, **facts: Any) -> dict[str, Any]:
    """The ``run`` part of a report: the job, the golden set, ``facts`` (in their order) and
    when the run finished."""
    finished = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {"job": job, "golden": str(golden), **facts, "finished": finished}


def write_report(evaluator: Evaluator, report: dict[str, Any], out: Path) -> None:
    """``report.json`` (nan → null) and ``report.md`` (the evaluator's body under a header)."""
    (out / "report.json").write_text(
        json.dumps(jsonable(report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    run = report.get("run", {})
    head = [f"# Evaluation: {run.get('job', evaluator.job)}", ""]
    for label, key in (
        ("golden set", "golden"),
        ("predictions", "predictions"),
        ("items", "items"),
        ("judge", "judge_id"),
        ("model version", "model_version"),
        ("prompt version", "prompt_version"),
        ("sample / seed", "sample"),
    ):
        if key in run:
            value = f"{run[key]} / {run.get('seed')}" if key == "sample" else run[key]
            head.append(f"- {label}: `{value}`")
    for warning in report.get("warnings", []):
        head.append(f"\n> **Warning:** {warning}")
    body = evaluator.markdown(report, out)
    (out / "report.md").write_text("\n".join(head) + "\n\n" + body.strip() + "\n", encoding="utf-8")


def read_report(path: str | Path) -> dict[str, Any]:
    """A ``report.json`` (or the folder holding one) as :func:`write_report` wrote it, checked
    to keep its items: a comparison pairs them (an older report is an :class:`InputError`
    saying how to write it again, see :func:`~evidex.evaluate.compare.check_report`)."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    report = read_json_object(path, "report")
    check_report(report, str(path))
    return report


def _read_progress(path: Path, fingerprint: str) -> dict[str, list[dict[str, Any]]]:
    """Completed groups of an earlier run with the same fingerprint; else none. The caller
    rewrites the file from what is returned, so a line cut by an interruption is dropped."""
    if not path.exists():
        return {}
    done: dict[str, list[dict[str, Any]]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        header = json.loads(lines[0]) if lines else {}
    except ValueError:
        header = {}
    if header.get("fingerprint") != fingerprint:
        logger.warning(
            "%s belongs to another run (judge, golden set or sample changed); starting afresh",
            path,
        )
        return {}
    for line in lines[1:]:
        try:
            entry = json.loads(line)
        except ValueError:
            break  # a line cut by the interruption: that group is re-run
        done[str(entry["group"])] = list(entry["rows"])
    return done


def _write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _with_configured_prompt(job: str, version: str) -> str:
    """The run's prompt version: the built-in prompts' ``version``, joined with the text of the
    job's configured prompt file when there is one (the job runs with it), so a report, its
    resume fingerprint and a calibration made from it follow the user's wording."""
    path = load_settings().prompts.get(job)
    if path is None:
        return version
    prompt = load_prompt(path)
    return sha256_hex(f"{version}\x1e{prompt.system}\x1e{prompt.user}")[:16]
