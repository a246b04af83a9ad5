"""``evidex audit``: claim-level grounding of generated answers, and the publish/review/block
decision. One answer prints one JSON object; ``--batch`` audits a JSONL file of answers and
writes one JSON object a line. The exit code is 0 whatever the decisions: they are in the
output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import ValidationError

from evidex.cli._app import app, err_console, write_json, write_lines
from evidex.cli._derive import job_flags
from evidex.cli._io import (
    RunFlags,
    TextOrFile,
    explain_passage_error,
    json_line,
    progress,
    read_lines,
    run_flags,
)
from evidex.cli._options import PromptOpt, batch_option, passages_option, unset_option
from evidex.cli._spend import report_spend
from evidex.errors import ConfigError, InputError
from evidex.jobs.audit import DEFINITION, AnswerInput, AuditOptionsModel, AuditResult, audit_many
from evidex.types import Passage

__all__ = ["audit_command", "read_answers", "read_context"]


ANSWER = TextOrFile(
    "--answer",
    "-a",
    help="The generated answer.",
    file_help="Read the answer from FILE.",
    what="the answer",
)


def read_context(path: str | Path) -> list[Passage]:
    """Passages from JSONL: an object a line (``passage_id``/``id`` optional, ``text``, ``title``,
    ``url`` ...) or a bare JSON string a line. A missing id becomes ``passage-N``, N being the
    passage's position, so ids match what the generator was shown."""
    name, lines = read_lines(path)
    passages: list[Passage] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        passages.append(
            _passage(json_at(line, f"{name}:{lineno}"), len(passages) + 1, f"{name}:{lineno}")
        )
    return passages


def _passage(data: Any, position: int, where: str) -> Passage:
    if isinstance(data, str):
        data = {"text": data}
    if not isinstance(data, dict) or "text" not in data:
        raise InputError(
            "expected a JSON object with a 'text' field, or a JSON string", where=where
        )
    if not any(k in data for k in ("passage_id", "id", "pid", "docid")):
        data = {"passage_id": f"passage-{position}", **data}
    try:
        return Passage.model_validate(data)
    except ValidationError as exc:
        raise InputError(explain_passage_error(exc), where=where) from exc


def json_at(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} (column {exc.colno})", where=where) from exc


def read_answers(path: str | Path) -> list[AnswerInput]:
    """Answers from JSONL, one object a line: ``answer`` (required), ``answer_id``,
    ``question``, ``passages`` (a list of passage objects or strings), ``claims``."""
    name, lines = read_lines(path)
    answers: list[AnswerInput] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        data = json_at(line, where)
        if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
            raise InputError("expected a JSON object with an 'answer' string", where=where)
        raw = data.get("passages", [])
        if not isinstance(raw, list):
            raise InputError("'passages' must be a list", where=where)
        data["passages"] = [_passage(p, i, f"{where} passage {i}") for i, p in enumerate(raw, 1)]
        if not data["answer"].strip():
            raise InputError("the answer is empty", where=where)
        try:
            answers.append(AnswerInput.model_validate(data))
        except ValidationError as exc:
            raise InputError(explain_passage_error(exc), where=where) from exc
    if not answers:
        raise InputError(
            "no answers: the file is empty (expected one JSON object a line)", where=name
        )
    return answers


@app.command("audit")
@run_flags()
@job_flags(DEFINITION)
def audit_command(
    flags: RunFlags,
    options: AuditOptionsModel,
    answer: Annotated[str | None, ANSWER.text_option] = None,
    answer_file: Annotated[Path | None, ANSWER.file_option] = None,
    passages: Annotated[
        str | None,
        passages_option(
            "The retrieved passages exactly as used for generation, one JSON object a line "
            '({"passage_id": ..., "text": ..., "title": ..., "url": ...}; ids default to '
            "passage-1, passage-2 ...) or one JSON string a line. '-' reads stdin."
        ),
    ] = None,
    batch: Annotated[
        Path | None,
        batch_option(
            "Audit many answers: one JSON object a line with answer, and optionally "
            "answer_id, question, passages, claims. Writes one JSON result a line."
        ),
    ] = None,
    question: Annotated[
        str | None,
        unset_option("--question", "-q", metavar="TEXT", help="The user's question."),
    ] = None,
    answer_id: Annotated[
        str | None,
        unset_option("--answer-id", metavar="ID", help="Id of the answer."),
    ] = None,
    prompt: PromptOpt = None,
) -> None:
    """Split a generated answer into verbatim claims and grade each against the passages.

    Prints JSON: claims (claim_text, offsets, classification, supporting_context_ids,
    supporting_quotes, explanation, contradicted, contradicting_quote, sources), the summary
    recomputed from the claims, and the decision (publish / review / block) with its reasons.
    An audit that could not be completed has source "fallback", at least decision review, and a
    review item for the claims without a valid grade (claims graded validly keep their grade);
    the exit code is 0 whatever the decision.
    """
    items = _inputs(answer, answer_file, passages, batch, question, answer_id)
    with flags.job("audit") as run, progress(len(items), "audit", "answers") as on_progress:
        run["prompt"] = prompt
        results = audit_many(items, **options.values(), on_progress=on_progress, **run)
    if batch is None:
        write_json(results[0].report(), flags.output)
    else:
        write_lines([json_line(r.report()) for r in results], flags.output)
    _tell(results)
    report_spend(results)


def _inputs(
    answer: str | None,
    answer_file: Path | None,
    passages: str | None,
    batch: Path | None,
    question: str | None,
    answer_id: str | None,
) -> list[AnswerInput]:
    if batch is not None:
        extra = [
            name
            for name, value in (
                ("--answer", answer),
                ("--answer-file", answer_file),
                ("--passages", passages),
                ("--question", question),
                ("--answer-id", answer_id),
            )
            if value
        ]
        if extra:
            raise ConfigError(
                "--batch reads answers, ids, questions and passages from its file; "
                f"drop {', '.join(extra)}"
            )
        return read_answers(batch)
    text = ANSWER.read(answer, answer_file, otherwise=" (or --batch)")
    if passages is None:
        raise ConfigError("--passages is required: the passages the answer was generated from")
    return [
        AnswerInput(
            answer=text,
            passages=list(read_context(passages)),
            question=question,
            answer_id=answer_id,
        )
    ]


def _tell(results: list[AuditResult]) -> None:
    """One line per answer on stderr: the decision, and where a fallback's review item is."""
    for r in results:
        extra = (
            f"; review items {', '.join(map(str, r.review_item_ids))}" if r.review_item_ids else ""
        )
        alert = " [alert: unsupported ratio above baseline]" if r.alert else ""
        err_console.print(
            f"{r.answer_id}: {r.decision.decision} ({r.summary.total_claims} claims, "
            f"{r.summary.unsupported} unsupported, source {r.source}){extra}{alert}",
            highlight=False,
            markup=False,
        )
