"""``evidex classify``: label an input from a taxonomy, each label backed by passage quotes.

Three forms: one input (``--input`` or ``--input-file``) prints one JSON result; ``--batch``
reads a JSONL of ``{id, input, passages}`` and writes one JSON result a line, with a progress
bar; ``--consistency N`` classifies one input N times as given and N times with the passages
shuffled, and prints how often the labels agree and how far the confidences spread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import ValidationError
from rich.markup import escape

from evidex.cli._app import app, err_console, write_json, write_lines
from evidex.cli._derive import job_flags
from evidex.cli._io import (
    RunFlags,
    TextOrFile,
    explain_passage_error,
    json_line,
    jsonl_objects,
    progress,
    read_passages,
    run_flags,
)
from evidex.cli._options import PromptOpt, batch_option, passages_option, unset_option
from evidex.cli._spend import report_spend
from evidex.errors import InputError, UsageError
from evidex.jobs.classify import (
    DEFINITION,
    ClassifyInput,
    ClassifyOptionsModel,
    ClassifyResult,
    classify_many,
)
from evidex.jobs.consistency import consistency_check
from evidex.types import Passage

__all__ = ["classify_command", "read_batch"]


def read_batch(path: str | Path) -> list[ClassifyInput]:
    """Inputs from a JSONL file, one ``{"id", "input", "passages": [...]}`` a line.

    Errors name the file and line; ids must be unique so that output lines can be joined back.
    """
    items: list[ClassifyInput] = []
    first_seen: dict[str, int] = {}
    for where, lineno, data in jsonl_objects(path):
        if not isinstance(data.get("passages"), list):
            raise InputError(
                'expected {"id": ..., "input": ..., "passages": [{"passage_id", "text"}, ...]}',
                where=where,
            )
        if not isinstance(data.get("input"), str) or not data["input"].strip():
            raise InputError("the 'input' text is missing or empty", where=where)
        passages = []
        for index, raw in enumerate(data["passages"]):
            try:
                passages.append(Passage.model_validate(raw))
            except ValidationError as exc:
                problem = explain_passage_error(exc)
                raise InputError(f"passages[{index}]: {problem}", where=where) from exc
        item_id = str(data.get("id", lineno))
        if item_id in first_seen:
            raise InputError(
                f"id {item_id!r} was already used on line {first_seen[item_id]}", where=where
            )
        first_seen[item_id] = lineno
        items.append(ClassifyInput(id=item_id, input=data["input"], passages=passages))
    return items


INPUT = TextOrFile(
    "--input",
    "-i",
    help="Text to classify.",
    file_help="Read the text from FILE.",
    what="the text to classify",
)


def _warn(results: list[ClassifyResult]) -> None:
    """Say on stderr what went to review or fell back: exit code 0 must not hide it."""
    fallbacks = [r for r in results if r.source == "fallback"]
    reviewed = sum(len(r.review) for r in results)
    if fallbacks:
        err_console.print(
            f"[yellow]warning:[/] {len(fallbacks)} result(s) fell back to unclassifiable "
            f"(run {fallbacks[0].run_id}: {escape(fallbacks[0].reason or '')})",
            highlight=False,
        )
    if reviewed:
        err_console.print(f"{reviewed} item(s) routed to the review queue (evidex review)")


@app.command("classify")
@run_flags()
@job_flags(DEFINITION)
def classify_command(
    flags: RunFlags,
    options: ClassifyOptionsModel,
    input: Annotated[str | None, INPUT.text_option] = None,
    input_file: Annotated[Path | None, INPUT.file_option] = None,
    passages: Annotated[
        str | None,
        passages_option(
            'Retrieved passages, one JSON object a line: {"passage_id": ..., "text": ...} '
            "(rank is optional: over budget, the lowest-ranked are left out first). '-' reads "
            "stdin."
        ),
    ] = None,
    batch: Annotated[
        Path | None,
        batch_option(
            'Classify many inputs: one {"id", "input", "passages": [...]} a line; writes '
            "one JSON result a line."
        ),
    ] = None,
    consistency: Annotated[
        int | None,
        unset_option(
            "--consistency",
            metavar="N",
            min=1,
            help="Instead of one result, classify N times as given and N times with shuffled "
            "passages (without the cache) and report label agreement and confidence spread.",
        ),
    ] = None,
    prompt: PromptOpt = None,
) -> None:
    """Assign labels from a taxonomy to a text, each backed by quotes from the passages.

    Prints JSON: classifications (label, confidence, supporting_evidence, counter_evidence),
    unclassifiable, unclassifiable_reason, evidence_gaps, source, and review (the review items
    opened and why). An answer still invalid after one retry becomes unclassifiable with
    source "fallback" (a review item too at medium and high risk); the exit code is still 0.
    """
    if batch is not None and (input is not None or input_file is not None or passages):
        raise UsageError("--batch carries its own inputs and passages; drop --input/--passages")
    if batch is not None and consistency is not None:
        raise UsageError("--consistency checks one input; it cannot be combined with --batch")
    if batch is None and passages is None:
        raise UsageError("give the retrieved passages with --passages (or use --batch)")
    if batch is not None:
        items = read_batch(batch)
    else:
        text = INPUT.read(input, input_file)
        items = [ClassifyInput(id="1", input=text, passages=read_passages(passages or "-"))]
    values = options.values()
    taxonomy = values.pop("labels")
    with flags.job("classify") as run:
        run["prompt"] = prompt
        if consistency is not None:
            report = consistency_check(
                items[0].input,
                items[0].passages,
                taxonomy,
                runs=consistency,
                **run,
                **values,
            )
            write_json(report.model_dump(mode="json"), flags.output)
            return
        with progress(len(items), "classify", "inputs") as on_progress:
            results = classify_many(items, taxonomy, on_progress=on_progress, **run, **values)
    if batch is None:
        write_json(results[0].report(), flags.output)
    else:
        lines = [json_line(r.report()) for r in results]
        write_lines(lines, flags.output, f"wrote {len(lines)} result(s) to {flags.output}")
    _warn(results)
    report_spend(results)
