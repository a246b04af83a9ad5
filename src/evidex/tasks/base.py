"""What every job's task provides to the harness.

A task is pure: it turns typed input into judge requests, checks a reply against the input it
was built from, and says what the explicit fallback is. It does no I/O and knows no backend.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import typing
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast, runtime_checkable

from pydantic import BaseModel

from evidex._text import contains_verbatim, quote_mismatch, sha256_hex
from evidex.judging import Message, Payload
from evidex.types import Passage

__all__ = [
    "Divisible",
    "ItemGrades",
    "PassageParts",
    "PromptTemplate",
    "ReplyInvalid",
    "Salvageable",
    "Salvaged",
    "Step",
    "StepBase",
    "StepRequest",
    "by_last_id",
    "count_ids",
    "exact_array",
    "halved",
    "passage_items",
    "passage_pairs",
    "passages_block",
    "passages_info",
    "passages_json",
    "quote_errors",
    "reply_list",
]

_PLACEHOLDER = re.compile(r"\[([A-Z_]+)\]")


@dataclass(frozen=True)
class PromptTemplate:
    """A versioned prompt: the version is the hash of every text the judge may be shown.

    ``reask`` is appended (with the validation errors in ``[ERRORS]``) after an invalid reply;
    ``strict`` is the stricter format reminder of the final, temperature-0 attempt. Editing any
    of them changes :attr:`version`, which invalidates the cache by construction.
    """

    name: str
    system: str
    user: str
    reask: str = (
        "Your previous reply could not be accepted. These problems were found:\n[ERRORS]\n"
        "Answer again with one corrected JSON object that fixes every problem listed."
    )
    strict: str = (
        "Reply with exactly one JSON object that matches the schema below, and nothing else: "
        "no prose, no code fences, no comments.\nSchema:\n[SCHEMA]"
    )

    # The template is frozen, so what is derived from its texts is computed once: every judge
    # call asks for the version (audit row, cache key) and renders the two messages.

    @functools.cached_property
    def version(self) -> str:
        text = "\x1e".join([self.name, self.system, self.user, self.reask, self.strict])
        return sha256_hex(text)[:16]

    def placeholders(self) -> set[str]:
        return set(self._placeholders)

    @functools.cached_property
    def _placeholders(self) -> frozenset[str]:
        return frozenset(_PLACEHOLDER.findall(self.system + self.user))

    @functools.cached_property
    def _pieces(self) -> tuple[list[str], list[str]]:
        """System and user text split at their slots: literal, slot name, literal, ..."""
        return _PLACEHOLDER.split(self.system), _PLACEHOLDER.split(self.user)

    def render(self, values: Mapping[str, str]) -> tuple[Message, ...]:
        """Fill ``[PLACEHOLDER]`` slots; a missing value is a programming error, not input."""
        if not self._placeholders <= values.keys():
            missing = sorted(self._placeholders - set(values))
            raise KeyError(f"template {self.name} needs values for {missing}")

        def fill(pieces: list[str]) -> str:
            # odd positions are slot names (the pattern's group); a value is never re-scanned
            return "".join(
                piece if i % 2 == 0 else values.get(piece, f"[{piece}]")
                for i, piece in enumerate(pieces)
            )

        system, user = self._pieces
        return (Message("system", fill(system)), Message("user", fill(user)))


@dataclass(frozen=True)
class StepRequest:
    """What a task asks of a judge for one batch: chat messages, the reply schema, and the
    typed payload that native judges read instead of the prose."""

    messages: tuple[Message, ...]
    schema: Mapping[str, Any]
    payload: Payload
    max_tokens: int = 2048


class ReplyInvalid(Exception):
    """A reply failed schema or semantic validation; ``errors`` go back to the judge verbatim."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = tuple(errors) or ("the reply was rejected",)
        super().__init__("; ".join(self.errors))


B = TypeVar("B")
B_contra = TypeVar("B_contra", contravariant=True)
V = TypeVar("V", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True)
class BatchInfo:
    """What the audit log and the review queue need to know of a batch."""

    query: str
    passage_ids: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


class StepBase(Generic[B, V]):
    """What every step declares, as class keywords and its type parameters::

        class TierStep(StepBase[TierBatch, TierBatchValue], name="tier", template=TIER_TEMPLATE):

    ``name`` files its exchanges in the audit log (``job.step``; the job is the part before
    the dot), ``template`` is the versioned prompt, ``max_attempts`` what the spec allows (the
    first try and the retries; default 2, the spec's one retry), and the validated value's type
    is the second type parameter. A public step that leaves one out is an error when its class
    is made, not when the harness first runs it; a private base (``_Name``) may declare a part.
    """

    job: str
    name: str
    template: PromptTemplate
    max_attempts: int = 2
    value_type: type[V]

    def __init_subclass__(
        cls,
        *,
        name: str | None = None,
        template: PromptTemplate | None = None,
        max_attempts: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if name is not None:
            cls.name, cls.job = name, name.partition(".")[0]
        if template is not None:
            cls.template = template
        if max_attempts is not None:
            cls.max_attempts = max_attempts
        for base in getattr(cls, "__orig_bases__", ()):
            args = typing.get_args(base)
            if len(args) == 2 and isinstance(args[1], type):
                cls.value_type = args[1]
        missing = [k for k in ("name", "template", "value_type") if not hasattr(cls, k)]
        if missing and not cls.__name__.startswith("_"):
            raise TypeError(f"step {cls.__name__} does not declare {', '.join(missing)}")

    def __init__(self, template: PromptTemplate | None = None) -> None:
        """``template``: this step's prompt in place of the class's (a user's own wording, see
        :mod:`evidex.tasks.custom`); its version goes into the cache key and the audit log."""
        if template is not None:
            self.template = template
        self._derived_values: dict[tuple[object, ...], tuple[tuple[object, ...], Any]] = {}

    def derived(self, what: str, sources: tuple[object, ...], make: Callable[[], T]) -> T:
        """``make()`` for ``what`` (a name the step gives each kind of value), computed once for
        these source objects (a run's tier scheme, its examples: the same objects in every
        batch of the run) and kept on this step, which a job builds per run. Keyed by the
        objects' identity, and the objects are held, so an id is not reused while its entry
        lives; a handful of entries at most."""
        key = (what, *map(id, sources))
        hit = self._derived_values.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], sources, strict=True)):
            if len(self._derived_values) >= 8:
                self._derived_values.clear()
            hit = self._derived_values[key] = (sources, make())
        return cast("T", hit[1])


class Step(Protocol, Generic[B_contra, V]):
    """One kind of validated judge exchange. The harness runs it with retries and fallback."""

    job: str
    name: str
    template: PromptTemplate
    max_attempts: int
    value_type: type[V]

    def request(self, batch: B_contra) -> StepRequest: ...

    def validate(self, batch: B_contra, data: Any) -> V:
        """Check parsed JSON against the batch; raise :class:`ReplyInvalid` listing every error."""
        ...

    def fallback(self, batch: B_contra, reason: str) -> V: ...

    def cache_material(self, batch: B_contra) -> Any:
        """The normalised input that, with the prompt and judge, identifies the answer."""
        ...

    def describe(self, batch: B_contra) -> BatchInfo: ...

    def labels(self, value: V) -> Any:
        """The final labels of a validated value, as written to the audit log."""
        ...


Item = TypeVar("Item")


@dataclass
class ItemGrades(Generic[T]):
    """A reply whose items (passages, claims) are graded one by one, sorted out: the valid items
    and the errors by item id, in the batch's order, and the errors that concern no item of the
    batch (invented ids, malformed entries). Validation rejects on any error; a salvage keeps
    ``valid``."""

    ids: tuple[str, ...]
    valid: dict[str, T] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)

    def errors(self) -> list[str]:
        return self.general + [e for i in self.ids for e in self.failed.get(i, [])]

    def reason(self, item_id: str, default: str) -> str:
        """Why one item has no valid grade: its own errors, else the batch's reason."""
        return "; ".join(self.failed.get(item_id, [default]))

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(i for i in self.ids if i in self.valid)

    def with_fallbacks(
        self,
        items: Sequence[Item],
        item_id: Callable[[Item], str],
        fallback: Callable[[Item, str], T],
        reason: str,
    ) -> tuple[list[T], tuple[Item, ...]]:
        """Each item's valid grade, else its fallback (its own errors as the reason, else the
        batch's), in the batch's order; and the items without a valid grade, for review."""
        values = [
            self.valid.get(item_id(i)) or fallback(i, self.reason(item_id(i), reason))
            for i in items
        ]
        return values, tuple(i for i in items if item_id(i) not in self.valid)

    def worth_salvaging(self) -> bool:
        """Some items valid and some not. With none valid there is nothing to keep; with all
        valid the fault lies outside the batch (an id it does not have), so none is trusted."""
        return 0 < len(self.valid) < len(self.ids)


@dataclass(frozen=True)
class Salvaged(Generic[B, V]):
    """The valid part of a reply that failed validation as a whole.

    ``value`` holds the items that passed every check on their own, marked as the judge's, and
    the explicit fallback for the rest; ``left`` is the batch narrowed to those rest, so the
    review item shows a person only what still needs one.
    """

    value: V
    kept: tuple[str, ...]
    left: B


@runtime_checkable
class Salvageable(Protocol, Generic[B, V]):
    """A step whose replies grade items independently (passages, claims), so that one item
    failing its checks need not throw away the others once the retries are spent."""

    def salvage(self, batch: B, data: Any, reason: str) -> Salvaged[B, V] | None:
        """The valid items of ``data`` with the fallback for the others; None when no item
        is valid (then the whole batch takes the fallback)."""
        ...


@runtime_checkable
class Divisible(Salvageable[B, V], Protocol):
    """A salvageable step whose batch can be asked in smaller parts: a batch that a judge
    cannot answer whole (a small model leaving passages out, a reply cut off at its token
    limit) is split in halves and each half asked again, down to one item, before anything
    takes the fallback (see :mod:`evidex.harness.runner`)."""

    def item_ids(self, batch: B) -> tuple[str, ...]:
        """The ids of the items the batch grades (passages, claims), in its order."""
        ...

    def halves(self, batch: B) -> tuple[B, B]:
        """The batch as two smaller batches, the first half of its items then the rest (the
        batch has at least two items)."""
        ...

    def joined(self, batch: B, values: Sequence[V]) -> V:
        """One value for ``batch`` from values of its parts: each item's grade from the last
        value that has it, in the batch's order (a salvage's value first, the parts' after)."""
        ...


class _PassageBatch(Protocol):
    """A dataclass batch of passages."""

    __dataclass_fields__: typing.ClassVar[dict[str, Any]]

    @property
    def passages(self) -> tuple[Passage, ...]: ...


PB = TypeVar("PB", bound=_PassageBatch)


class PassageParts(Generic[PB]):
    """The item ids and halves of a batch whose items are its passages (a frozen dataclass
    with a ``passages`` tuple), for a :class:`Divisible` step: tier's grades, rerank's scores
    and rankings."""

    def item_ids(self, batch: PB) -> tuple[str, ...]:
        return tuple(p.passage_id for p in batch.passages)

    def halves(self, batch: PB) -> tuple[PB, PB]:
        first, rest = halved(batch.passages)
        return with_passages(batch, first), with_passages(batch, rest)


def with_passages(batch: PB, passages: Sequence[Passage]) -> PB:
    """``batch`` with other passages, the rest of it the same."""
    return dataclasses.replace(batch, passages=tuple(passages))


def halved(items: Sequence[T]) -> tuple[tuple[T, ...], tuple[T, ...]]:
    """``items`` in two halves, the first one the larger when the count is odd."""
    middle = (len(items) + 1) // 2
    return tuple(items[:middle]), tuple(items[middle:])


def by_last_id(
    values: Sequence[Sequence[T]], ids: Sequence[str], item_id: Callable[[T], str]
) -> list[T]:
    """The items of ``ids`` in that order, each from the last of ``values`` that holds it."""
    found: dict[str, T] = {}
    for items in values:
        found.update((item_id(i), i) for i in items)
    return [found[i] for i in ids if i in found]


def passages_json(items: Sequence[Mapping[str, Any]]) -> str:
    """Passages as a JSON array: an unambiguous data block the prompt tells the judge not to
    obey.

    The text is ``json.dumps(items, ensure_ascii=False, indent=1)``. With an indent the json
    module encodes in Python, which took a tenth of a judge call's CPU at high concurrency, so
    the usual shape (objects of string fields) is laid out here with the C string encoder;
    anything else goes to json.dumps."""
    items = list(items)
    if not items or not all(_flat_strings(item) for item in items):
        return json.dumps(items, ensure_ascii=False, indent=1)
    objects = (
        " {\n"
        + ",\n".join(f"  {_encode_string(k)}: {_encode_string(v)}" for k, v in item.items())
        + "\n }"
        for item in items
    )
    return "[\n" + ",\n".join(objects) + "\n]"


_encode_string: Callable[[str], str] = json.encoder.encode_basestring


def _flat_strings(item: Any) -> bool:
    return (
        type(item) is dict
        and bool(item)
        and all(type(k) is str and type(v) is str for k, v in item.items())
    )


def passage_items(passages: Sequence[Passage]) -> list[dict[str, str]]:
    """Passages as the judge is shown them: each one's id and text, nothing else."""
    return [{"passage_id": p.passage_id, "text": p.text} for p in passages]


def passages_block(passages: Sequence[Passage]) -> str:
    """The passages as a prompt's data block: their ids and texts as :func:`passages_json`.
    One function, so that every task shows a judge its passages the same way."""
    return passages_json(passage_items(passages))


def passage_pairs(passages: Sequence[Passage]) -> list[list[str]]:
    """The passages as cache material: ``[id, text]`` in the order shown (order sways a
    judge, so it is part of what identifies an answer)."""
    return [[p.passage_id, p.text] for p in passages]


def passages_info(
    query: str, passages: Sequence[Passage], extra: Mapping[str, Any] | None = None
) -> BatchInfo:
    """What the audit log and the review queue record of a batch over these passages."""
    return BatchInfo(
        query=query, passage_ids=tuple(p.passage_id for p in passages), extra=dict(extra or {})
    )


def exact_array(items: Mapping[str, Any], count: int) -> dict[str, Any]:
    """JSON schema of a reply list with exactly one entry per input item (passage, claim):
    with constrained decoding a judge can then neither stop early nor add entries."""
    return {"type": "array", "minItems": count, "maxItems": count, "items": items}


def reply_list(data: Any, key: str) -> list[Any]:
    """The list a reply holds under ``key``; :class:`ReplyInvalid` when the reply is not a JSON
    object with such a list."""
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise ReplyInvalid([f'the reply must be a JSON object with a "{key}" list'])
    return list(data[key])


def count_ids(items: Sequence[Any], key: str) -> Counter[str]:
    """How often the items of a reply that are JSON objects give each id under ``key``."""
    return Counter(str(item.get(key)) for item in items if isinstance(item, dict))


def quote_errors(at: str, entry: Mapping[str, Any], by_id: Mapping[str, Passage]) -> list[str]:
    """What is wrong with a cited quote ``{"passage_id", "quoted_text"}`` of a reply (``at``:
    where it is in the reply), in words the judge can act on: an unknown id, an empty quote, a
    quote from another passage, or the nearest real text when it is not verbatim."""
    pid, quote = entry.get("passage_id"), entry.get("quoted_text")
    if not isinstance(pid, str) or pid not in by_id:
        return [f"{at}: passage_id {pid!r} is not in the retrieved context; use only the ids given"]
    if not isinstance(quote, str) or not quote.strip():
        return [f"{at}: quoted_text is empty; copy the exact words from passage {pid!r}"]
    if contains_verbatim(by_id[pid].text, quote):
        return []
    elsewhere = [other for other, p in by_id.items() if contains_verbatim(p.text, quote)]
    if elsewhere:
        return [
            f"{at}: quoted_text {quote[:120]!r} is not in passage {pid!r} but in passage "
            f"{elsewhere[0]!r}; give the passage_id of the passage the quote comes from"
        ]
    return [
        f"{at}: quoted_text {quote[:80]!r} is not verbatim in passage {pid!r}: "
        f"{quote_mismatch(by_id[pid].text, quote)}. Copy the words exactly"
    ]
