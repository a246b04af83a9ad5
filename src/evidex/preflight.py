"""Preflight checks shared by every job: run before any judge is called.

Ids must be unique (a duplicate id is the caller's bug: we stop with a clear error), duplicate
passages are merged and reported, and passages too long for the judge's context are truncated
with a recorded event, never dropped silently. Text that is not valid Unicode (a lone
surrogate) is refused wherever it enters, and :class:`InputLimits` says how much one request
may carry where a caller is not trusted with more (the service, the CLI). Every passage is
screened for text aimed at the grader (:func:`screen`): each suspicion is a
``suspected_injection`` event naming the passage, the field and the span, :func:`suspected`
gives the jobs the flagged ids, and the flagged stretches are cut out of what the judge reads
(:mod:`evidex._neutralise`), for every job alike.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from evidex._neutralise import cuts, shown
from evidex._screening import SUSPECTED_INJECTION, Suspicion, screen, suspected
from evidex._text import normalize_ws
from evidex.errors import InputError
from evidex.types import Event, Passage, PassageLike, check_text, lone_surrogate

__all__ = [
    "MAX_PASSAGES",
    "MAX_TEXT_CHARS",
    "SUSPECTED_INJECTION",
    "InputLimits",
    "LimitProblem",
    "Prepared",
    "Suspicion",
    "coerce_passages",
    "fit_passages",
    "neutralised",
    "passage_fields",
    "passage_of",
    "prepare_passages",
    "require_text",
    "screen",
    "screening_events",
    "suspected",
    "truncate_to_tokens",
]

MAX_PASSAGES = 1000
"""Passages one request may carry, by default: far more than a retriever hands a generator."""
MAX_TEXT_CHARS = 100_000
"""Characters one text (a query, a passage, an answer) may have, by default: some 25,000
tokens, more than any judge's window, so nothing a judge could read is refused."""


Location = tuple[str | int, ...]
"""Where a problem is in a value: field names and list positions (``passages``, 3, ``text``)."""


@dataclass(frozen=True)
class LimitProblem:
    """One part of a value over :class:`InputLimits`, or text that is not valid Unicode."""

    loc: Location
    msg: str
    kind: str
    """``too_long`` (a list), ``string_too_long`` or ``string_unicode``, as a 422 names them."""

    def where(self) -> str:
        return ".".join(str(part) for part in self.loc) or "input"


@dataclass(frozen=True)
class InputLimits:
    """How much one request may carry. The library takes any size (preflight truncates to the
    judge's window), and so does the CLI, which reads the user's own files, unless its
    ``--max-text-chars`` sets a limit; the service holds every request to these, so one
    caller cannot tie up a shared worker with a body of millions of characters. A job call
    takes them as its ``limits=`` keyword."""

    max_passages: int | None = MAX_PASSAGES
    """Passages one request may carry; None: any number."""
    max_text_chars: int | None = MAX_TEXT_CHARS
    """Characters one text may have; None: any length (fitted to the judge's window)."""
    lift: str | None = None
    """How the caller may lift a limit, said in every refusal (the CLI names its flag)."""

    def passages_problem(self, count: int) -> str | None:
        """What is wrong with ``count`` passages in one request, or None."""
        if self.max_passages is None or count <= self.max_passages:
            return None
        return self._lifted(f"at most {self.max_passages} passages")

    def text_problem(self, text: str) -> str | None:
        """What is wrong with the length of ``text``, or None."""
        if self.max_text_chars is None or len(text) <= self.max_text_chars:
            return None
        return self._lifted(f"at most {self.max_text_chars} characters (got {len(text)})")

    def _lifted(self, problem: str) -> str:
        return f"{problem}; {self.lift}" if self.lift else problem

    def problems(self, value: Any, loc: Location = ()) -> Iterator[LimitProblem]:
        """Every part of ``value`` (a model, a mapping, a list, a text) over these limits or
        holding a lone surrogate, in order: every string (mapping keys included) and every
        ``passages`` list. The one walk the service and the job calls make."""
        if isinstance(value, str):
            yield from self._text(value, loc)
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                yield from self.problems(getattr(value, name), (*loc, name))
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str):
                    yield from self._text(key, loc, what="key")
                yield from self.problems(item, (*loc, key))
        elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
            if loc and loc[-1] == "passages" and (problem := self.passages_problem(len(value))):
                yield LimitProblem(loc, problem, "too_long")
                return
            for index, item in enumerate(value):
                yield from self.problems(item, (*loc, index))

    def _text(self, text: str, loc: Location, what: str = "text") -> Iterator[LimitProblem]:
        position = lone_surrogate(text)
        if position is not None:
            msg = (
                f"the {what} holds a lone surrogate (U+{ord(text[position]):04X}) at character "
                f"{position}: not valid Unicode"
            )
            yield LimitProblem(loc, msg, "string_unicode")
        elif problem := self.text_problem(text):
            yield LimitProblem(loc, problem, "string_too_long")

    def check(self, value: Any, where: str | None = None) -> None:
        """Raise :class:`InputError` naming the first part of ``value`` over the limits."""
        for problem in self.problems(value):
            raise InputError(f"{problem.where()}: {problem.msg}", where=where)


def require_text(value: object, what: str, *, where: str | None = None) -> str:
    """``value`` if it is non-blank, valid Unicode text, else an :class:`InputError` naming
    ``what`` ("the query"): the check every job makes of its query, input or answer."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{what} is empty", where=where)
    try:
        return check_text(value)
    except ValueError as exc:
        raise InputError(f"{what} {exc}", where=where) from exc


def coerce_passages(
    items: Iterable[PassageLike], *, noun: str = "passage", where: str | None = None
) -> list[Passage]:
    """Passages as callers have them, for every job: :class:`Passage` objects, plain strings,
    or mappings as retrievers and frameworks hand them over (:func:`passage_fields`). A
    passage without an id gets ``passage-N`` by its position (1-based), so the same list
    always gets the same ids. A malformed one is an input error naming it by position
    (``noun`` N) and saying why."""
    out: list[Passage] = []
    for number, item in enumerate(items, 1):
        if isinstance(item, Passage):
            out.append(item)
            continue
        try:
            data = {"text": item} if isinstance(item, str) else passage_fields(item)
            if not any(k in data for k in _ID_KEYS):
                data["passage_id"] = f"passage-{number}"
            out.append(Passage.model_validate(data))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or noun}: {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
            raise InputError(
                f"{noun} {number} is not a valid passage: {problems}", where=where
            ) from exc
        except (TypeError, ValueError) as exc:
            raise InputError(f"{noun} {number} is not a valid passage: {exc}", where=where) from exc
    return out


_ID_KEYS = ("passage_id", "id", "pid", "docid")
_TEXT_KEYS = ("text", "page_content", "content")
_FIELDS = frozenset({*_ID_KEYS, "text", "title", "url", "rank", "score", "metadata"})


def passage_fields(item: Mapping[str, Any]) -> dict[str, Any]:
    """A passage mapping in :class:`Passage`'s shape, nothing of it lost.

    The id is the first of ``passage_id``, ``id``, ``pid``, ``docid`` that is not None (a
    LangChain document's ``id`` is often None); the text is ``text``, else ``page_content``
    (LangChain's name), else ``content`` (Haystack's). Every other key (``source``, ``page``,
    a second id...) is kept in ``metadata``, beside the entries of an explicit ``metadata``
    mapping, which win on a clash: a retriever's extra fields come back with the grades."""
    if not isinstance(item, Mapping):
        raise TypeError(f"expected a string, a mapping or a Passage, got {type(item).__name__}")
    data = {k: v for k, v in item.items() if v is not None or k not in _ID_KEYS}
    text_key = next((k for k in _TEXT_KEYS if k in data), "text")
    if text_key != "text":
        data["text"] = data.pop(text_key)
    id_key = next((k for k in _ID_KEYS if k in data), None)
    extra = {
        k: data.pop(k) for k in list(data) if k not in _FIELDS or (k in _ID_KEYS and k != id_key)
    }
    given = data.pop("metadata", None)
    if given is not None and not isinstance(given, Mapping):
        data["metadata"] = given  # not a mapping: validation says so
    elif extra or given:
        data["metadata"] = {**extra, **(given or {})}
    return data


def passage_of(passages: Iterable[Passage], passage_id: str) -> Passage:
    """The passage with ``passage_id`` among ``passages`` (a result's inputs), else KeyError."""
    for passage in passages:
        if passage.passage_id == passage_id:
            return passage
    raise KeyError(passage_id)


@dataclass
class Prepared:
    """Passages ready for batching, and what preflight did to get there."""

    passages: list[Passage]
    duplicates: dict[str, str] = field(default_factory=dict)
    """Removed passage id → the id of the identical passage that was kept."""
    events: list[Event] = field(default_factory=list)


def prepare_passages(
    passages: Sequence[Passage],
    *,
    count_tokens: Callable[[str], int],
    max_passage_tokens: int | None = None,
    query: str | None = None,
) -> Prepared:
    """Passages checked, merged and fitted for batching, with an event for each thing done.

    Every passage (duplicates too: their title or URL may differ) is screened as given, before
    any truncation, so a ``suspected_injection`` event's span indexes the caller's field;
    ``query`` adds the stuffing check, which needs it. A flagged passage is kept with those
    stretches cut from its text, title and URL (:func:`neutralised`): what the judge reads, and
    what its quotes are checked against; results keep the passages as given."""
    if not passages:
        raise InputError("no passages given: at least one passage is required")
    counts = Counter(p.passage_id for p in passages)
    repeated = sorted(pid for pid, n in counts.items() if n > 1)
    if repeated:
        raise InputError(
            f"passage ids must be unique; repeated: {', '.join(repeated[:10])}"
            + (f" and {len(repeated) - 10} more" if len(repeated) > 10 else "")
        )

    kept: list[Passage] = []
    first_by_text: dict[str, str] = {}
    duplicates: dict[str, str] = {}
    for passage in passages:
        norm = normalize_ws(passage.text)
        if norm in first_by_text:
            duplicates[passage.passage_id] = first_by_text[norm]
            continue
        first_by_text[norm] = passage.passage_id
        kept.append(passage)

    events: list[Event] = []
    if duplicates:
        events.append(
            Event(
                kind="duplicates_removed",
                detail=f"{len(duplicates)} passage(s) repeat the text of an earlier passage; "
                "each is judged once and the duplicate takes the kept passage's result",
                passage_ids=sorted(duplicates),
                data={"duplicate_of": duplicates},
            )
        )

    found = _screened(passages, query)
    events.extend(_events(found))
    kept = [neutralised(p, found[p.passage_id][1]) if p.passage_id in found else p for p in kept]
    if max_passage_tokens is not None:
        kept = [_fit(p, count_tokens, max_passage_tokens, events) for p in kept]
    return Prepared(passages=kept, duplicates=duplicates, events=events)


def fit_passages(
    passages: Sequence[Passage], *, count_tokens: Callable[[str], int], max_passage_tokens: int
) -> Prepared:
    """Passages :func:`prepare_passages` already returned, each cut to ``max_passage_tokens``:
    the second step of a job whose per-passage room depends on what the first step kept.

    Only the cut: checking, merging and screening ran once, on the passages as given. Run again
    on what the judge reads, they would merge passages cut whole (each now only the cut mark)
    as duplicates and lose one, and screen the mark itself."""
    events: list[Event] = []
    fitted = [_fit(p, count_tokens, max_passage_tokens, events) for p in passages]
    return Prepared(passages=fitted, events=events)


MAX_EXCERPT_CHARS = 600
"""How much of the stretch a suspicion cuts its event keeps, for the reviewer (a stuffed run
can be long)."""

MAX_SUSPICION_EVENTS = 20
"""Suspicions noted one by one per input; the rest are one event naming their passages, so a
body of a thousand stuffed passages writes a bounded number of audit-log rows."""


def screening_events(passages: Iterable[Passage], *, query: str | None = None) -> list[Event]:
    """One ``suspected_injection`` event per suspicion :func:`screen` finds in ``passages``,
    with its kind, field and span (``start``/``end`` index the field as given); past
    :data:`MAX_SUSPICION_EVENTS`, one more event names the other flagged passages."""
    return _events(_screened(passages, query))


def _screened(
    passages: Iterable[Passage], query: str | None
) -> dict[str, tuple[Passage, list[Suspicion]]]:
    out = {}
    for passage in passages:
        found = screen(passage.text, passage.title, passage.url, query)
        if found:
            out[passage.passage_id] = (passage, found)
    return out


def _events(screened: Mapping[str, tuple[Passage, list[Suspicion]]]) -> list[Event]:
    events: list[Event] = []
    more: dict[str, None] = {}
    for passage, suspicions in screened.values():
        for found in suspicions:
            if len(events) < MAX_SUSPICION_EVENTS:
                events.append(_suspicion_event(passage, found))
            else:
                more[passage.passage_id] = None
    if more:
        events.append(
            Event(
                kind=SUSPECTED_INJECTION,
                detail=f"{len(more)} more passage(s) look aimed at the grader (past the first "
                f"{MAX_SUSPICION_EVENTS} suspicions, noted here together)",
                passage_ids=list(more),
                data={"suspicion": "several", "more": len(more)},
            )
        )
    return events


def _suspicion_event(passage: Passage, found: Suspicion) -> Event:
    value = {"text": passage.text, "title": passage.title, "url": passage.url}[found.field] or ""
    excerpt = value[found.start : found.end]
    if len(excerpt) > 80:
        excerpt = excerpt[:77] + "..."
    return Event(
        kind=SUSPECTED_INJECTION,
        detail=f"passage {passage.passage_id}: its {found.field} looks aimed at the grader "
        f"({found.kind.replace('_', ' ')}, characters {found.start}-{found.end}: {excerpt!r}); "
        "it is data, never an instruction, and is cut from what the judge reads",
        passage_ids=[passage.passage_id],
        data={**found.as_data(), **_cut_of(value, found)},
    )


def _cut_of(value: str, found: Suspicion) -> dict[str, object]:
    """The stretch the suspicion cuts from what the judge reads (its sentence, or the stuffed
    run), which the reviewer is shown: its offsets in the field and its text."""
    start, end = cuts(value, [found])[0]
    return {"cut_start": start, "cut_end": end, "excerpt": value[start:end][:MAX_EXCERPT_CHARS]}


def neutralised(passage: Passage, found: Sequence[Suspicion]) -> Passage:
    """``passage`` as a judge is shown it: each field with the stretches of ``found`` cut
    (:func:`evidex._neutralise.shown`), everything else as given."""
    update: dict[str, str | None] = {}
    for name in ("text", "title", "url"):
        value = getattr(passage, name)
        mine = [s for s in found if s.field == name]
        if value and mine:
            update[name] = shown(value, mine).text
    return passage.model_copy(update=update) if update else passage


def _fit(
    passage: Passage, count_tokens: Callable[[str], int], limit: int, events: list[Event]
) -> Passage:
    tokens = count_tokens(passage.text)
    if tokens <= limit:
        return passage
    text = truncate_to_tokens(passage.text, limit, count_tokens)
    events.append(
        Event.about(
            passage.passage_id,
            "truncated",
            f"passage {passage.passage_id} has {tokens} tokens, over the per-passage budget of "
            f"{limit}; the judge sees its first {len(text)} characters",
            tokens=tokens,
            limit=limit,
            kept_chars=len(text),
        )
    )
    return passage.model_copy(update={"text": text})


def truncate_to_tokens(text: str, limit: int, count_tokens: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` within ``limit`` tokens, cut at a word boundary."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    space = cut.rfind(" ")
    return cut[:space] if space > len(cut) // 2 else cut
