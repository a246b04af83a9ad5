"""Small text utilities shared by tasks and judges: normalisation, verbatim checks, hashing,
token estimates and JSON extraction from chatty model output."""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

import orjson

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _ascii_normal(text: str) -> bool:
    """Whether ASCII ``text`` is already whitespace-normal: no space at its ends, no two in a
    row, and none of the other ASCII characters str.isspace() holds true. Eleven scans for a
    short string (memchr), a sixth of the cost of splitting and joining."""
    return not (
        text[:1] == " "
        or text[-1:] == " "
        or "  " in text
        or "\n" in text
        or "\t" in text
        or "\r" in text
        or "\x0b" in text
        or "\x0c" in text
        or "\x1c" in text
        or "\x1d" in text
        or "\x1e" in text
        or "\x1f" in text
    )


def normalize_ws(text: str) -> str:
    """Collapse runs of whitespace and unify curly quotes, so verbatim checks forgive layout."""
    if not text.isascii():  # NFKC and the quote table leave ASCII as it is
        text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    elif _ascii_normal(text):  # as most passages are; preflight normalises every one
        return text
    # str.split() breaks on exactly the characters regex \s matches (str.isspace), and is
    # about 3x faster than re.sub
    return " ".join(text.split())


# a space beside a punctuation mark; after normalize_ws every run of whitespace is one space,
# and an empty replacement runs in C where a group reference goes through Python per match.
# Every match starts with the space (the mark before it is looked behind for after it), so the
# engine scans for a literal: 4x faster than trying a lookbehind at every position
_SPACE_BY_PUNCT = re.compile(r" (?:(?=[^\w\s])|(?<=[^\w\s] ))")


def _match_form(text: str) -> str:
    """What a verbatim check compares: whitespace collapsed, case folded, and no space next to
    punctuation. Web text is full of tokenisation spacing ("( FRQ )") and a quote may capitalise
    its first word; neither changes what the quote says, and a model cannot see the difference."""
    return _SPACE_BY_PUNCT.sub("", normalize_ws(text).casefold())


@functools.lru_cache(maxsize=4096)
def _haystack_form(text: str) -> str:
    """The match form of a source text. Every quote and snippet of a reply is checked against
    its passage, and again on each attempt: a passage is normalised once, not per check."""
    return _match_form(text)


CUT_MARK = "[flagged text removed]"
"""What a judge reads where preflight cut text aimed at the grader out of a passage
(:mod:`evidex._neutralise`). The pieces between marks are the caller's own characters, so a
quote verbatim in one piece is verbatim in the original text, and one that runs across a mark
is in neither."""


def cut_whole(text: str) -> bool:
    """Whether nothing but cut marks (and blanks) is left of ``text``: preflight cut all of
    it, so there is nothing to grade and nothing to quote."""
    return not text.replace(CUT_MARK, "").strip()


def contains_verbatim(haystack: str, needle: str) -> bool:
    """True when ``needle`` occurs in ``haystack``, forgiving layout (see :func:`_match_form`).
    In a text preflight cut (it holds :data:`CUT_MARK`), within one of its pieces only."""
    if CUT_MARK in haystack:
        return any(contains_verbatim(piece, needle) for piece in haystack.split(CUT_MARK))
    if needle in haystack and needle.isascii() and haystack.isascii() and not needle.isspace():
        # the common case, a snippet copied exactly: collapsing whitespace, folding case and
        # dropping spaces by punctuation keep an ASCII substring a substring (each step looks
        # only at a character and its neighbours, and the needle's ends are trimmed alike),
        # so the match forms need not be built
        return bool(needle)
    n = _match_form(needle)
    return bool(n) and n in _haystack_form(haystack)


def nearest_span(haystack: str, needle: str) -> str:
    """The span of ``haystack`` most like ``needle``: shown when a quote is not verbatim."""
    hay, ned = normalize_ws(haystack), normalize_ws(needle)
    if not hay or not ned:
        return ""
    matcher = difflib.SequenceMatcher(None, hay, ned, autojunk=False)
    block = max(matcher.get_matching_blocks(), key=lambda b: b.size)
    start = max(0, block.a - block.b)
    return hay[start : start + len(ned)]


def quote_mismatch(haystack: str, needle: str) -> str:
    """Where a quote that is not verbatim stops following the source, in words a model can act
    on. A re-ask that showed only the first characters of quote and closest text failed on long
    quotes wrong in one word near the end (two equal strings: the model repeated itself) and on
    quotes that splice two sentences."""
    hay, words = normalize_ws(haystack), normalize_ws(needle).split(" ")
    if not hay or not words[0]:
        return "the text is empty"

    def longest(found: Callable[[int], bool]) -> int:
        low, high = 0, len(words)  # found(n) holds for every n up to the answer
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if found(mid) else (low, mid - 1)
        return low

    head = longest(lambda n: contains_verbatim(hay, " ".join(words[:n])))
    if head:
        matched, following = " ".join(words[:head]), " ".join(words[head : head + 8])
        message = (
            f"it follows the text up to {_tail(matched)!r}; then the quote has {following!r}, "
            "which the text does not have there"
        )
        at = hay.lower().find(matched.lower())
        if at >= 0:
            message += f" (the text goes on {hay[at + len(matched) :][:50].strip()!r})"
        return message
    tail = longest(lambda n: contains_verbatim(hay, " ".join(words[len(words) - n :])))
    if tail:
        start = " ".join(words[: len(words) - tail][:8])
        return f"the text does not have its start {start!r}, though it has what follows"
    return f"no part of it is in the text; the closest text is {nearest_span(hay, needle)[:120]!r}"


def _tail(text: str, size: int = 40) -> str:
    return text if len(text) <= size else "..." + text[-size:]


def sha256_hex(data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def wire_json(value: Any) -> bytes:
    """JSON as UTF-8 bytes, no spaces, non-ASCII as it is: what goes on the wire (a judge
    call's body). orjson writes an 8 KB body in 2 us where ``json`` takes 40, CPU that a loop
    with 64 calls in flight has for the answers. Not for hashing: it writes some floats
    differently (``1e-7`` for ``1e-07``), so keys stay with :func:`stable_json`."""
    try:
        return orjson.dumps(value)
    except TypeError:  # what orjson refuses (lone surrogates, ints past 64 bits): json's way
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def read_json(data: str | bytes) -> Any:
    """Parse JSON text: orjson (2-4x faster on a reply), and ``json`` for what only it takes
    (``NaN``, lone surrogates, UTF-16) and for integers of 19 digits or more (orjson makes
    those past 64 bits floats), so what parsed before parses the same and what did not raises
    ``json``'s ``ValueError``."""
    if not _has_long_digit_run(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


def _has_long_digit_run(data: str | bytes) -> bool:
    """Whether ``data`` has 19 digits in a row: a C pass over the bytes (3 us for a reply,
    where a regular expression takes 40)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return _LONG_RUN in raw.translate(_DIGITS_AS_ZERO)


def stable_json(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces) for hashing.

    The text is ``json``'s (with ``default=str``), which the keys of existing caches were made
    from. A value of strings, ints, booleans and None only (a batch's ids and texts) is written
    by orjson, 20x faster and to the same text; anything else (floats, which orjson writes
    differently, enums, objects) goes through ``json``."""
    if _plain(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
        except TypeError:  # lone surrogates, ints past 64 bits
            pass
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_PLAIN_LEAVES = frozenset({str, int, bool, type(None)})
_PLAIN_NODES = 100_000
"""Past this many nodes the check gives up (``json`` writes the value, and finds a cycle)."""


def _plain(value: Any) -> bool:
    """Whether ``value`` is made only of lists, tuples, str-keyed dicts and the leaves orjson
    and json write alike (exact types: subclasses such as enums are written differently)."""
    pending, seen = [value], 0
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind in _PLAIN_LEAVES:
            continue
        seen += 1
        if seen > _PLAIN_NODES:
            return False
        if kind is list or kind is tuple:
            pending.extend(item)
        elif kind is dict and all(type(k) is str for k in item):
            pending.extend(item.values())
        else:
            return False
    return True


def stable_json_spliced(values: Mapping[str, Any], serialised: Mapping[str, str]) -> str:
    """``stable_json`` of an object holding ``values`` and ``serialised``, where the values of
    ``serialised`` are already canonical JSON (made once, used for many objects) and go in as
    they are: the same text as serialising the whole object."""
    parts = {key: stable_json(value) for key, value in values.items()}
    parts.update(serialised)
    return "{" + ",".join(f"{stable_json(key)}:{parts[key]}" for key in sorted(parts)) + "}"


def estimate_tokens(text: str) -> int:
    """A documented estimate for judges without a local tokenizer: one token per 4 characters.

    English BPE vocabularies average 3.5-4.5 characters a token, so this errs high for prose
    and keeps the budget check conservative.
    """
    return (len(text) + 3) // 4


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def extract_json_object(text: str) -> Any:
    """Parse the JSON object in a model reply that may wrap it in prose or code fences.

    Raises ``ValueError`` with a short reason when there is no complete object, or when the
    reply holds more than one (in fences or in prose): which one is the answer is then not the
    reply's to say, and a passage that carries a complete fake reply would otherwise get to
    choose, so the judge is asked again for exactly one.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply is empty")
    try:
        return read_json(stripped)
    except ValueError:
        pass
    fenced = []
    for match in _FENCE.finditer(text):
        try:
            fenced.append(read_json(match.group(1).strip()))
        except ValueError:
            continue
    if fenced:
        return _the_one(fenced)
    decoder = json.JSONDecoder()
    found: list[Any] = []
    end = 0
    for match in re.finditer(r"[{\[]", text):
        if match.start() < end:
            continue  # inside an object already taken
        try:
            value, stop = decoder.raw_decode(text, match.start())
        except ValueError:
            if _still_open(text, match.start()):
                break  # cut off: objects inside it are fragments, not the answer
            continue
        if isinstance(value, dict):
            found.append(value)
            end = stop
    if found:
        return _the_one(found)
    if "{" in text:
        raise ValueError("the reply holds no complete JSON object (truncated or malformed)")
    raise ValueError("the reply holds no JSON object")


def cut_off(text: str) -> bool:
    """True when the reply's first JSON object is still open where the text ends: a reply
    stopped mid-way (at a token limit the server did not report). A reply that closes a code
    fence after it was ended by the model, malformed rather than cut."""
    start = text.find("{")
    return start >= 0 and not text.rstrip().endswith("```") and _still_open(text, start)


def _the_one(objects: list[Any]) -> Any:
    if len(objects) > 1:
        raise ValueError(
            f"the reply holds {len(objects)} JSON objects; answer with exactly one object"
        )
    return objects[0]


def _still_open(text: str, start: int) -> bool:
    """True when the bracket at ``start`` is not closed by the end of ``text`` (strings aware)."""
    depth, in_string, escaped = 0, False, False
    for ch in text[start:]:
        if escaped:
            escaped = False
        elif in_string:
            escaped = ch == "\\"
            in_string = ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return False
    return True
