"""The JSON of the judge-call path (request bodies, completions, replies, the canonical text of
cache keys) is read and written by orjson where it can be, for its speed; what it writes must be
the text ``json`` wrote (cache keys made before stay valid), and what ``json`` read must still
read the same, including what only ``json`` takes."""

from __future__ import annotations

import enum
import json
import random
import uuid
from typing import Any

import pytest

from evidex._text import extract_json_object, read_json, stable_json, wire_json

CHARS = ["a", " ", '"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "\u00e9", "\u2028", "\U0001f600"]


def value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value of the kinds a request body holds (no floats past simple ones)."""
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return "".join(rng.choice(CHARS) for _ in range(rng.randint(0, 12)))
    if kind == 1:
        return rng.randint(-(2**63), 2**63 - 1)
    if kind == 2:
        return rng.choice([0.0, 0.5, 1.0, -2.25, 300.0])
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return rng.choice(["system", "user", "tier", ""])
    if kind == 5:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        value(rng, 3) if rng.random() < 0.5 else f"k{i}": value(rng, depth + 1) for i in range(4)
    }


def as_json(v: Any) -> bytes:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def test_wire_json_writes_the_bytes_json_wrote() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        v = {str(k): value(rng) for k in range(rng.randint(1, 4))}
        assert wire_json(v) == as_json(v)


def test_what_orjson_refuses_goes_the_way_json_went() -> None:
    big = {"n": 2**70}
    assert wire_json(big) == b'{"n":1180591620717411303424}'
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate: json's error, as before
        wire_json({"text": "\ud800"})
    with pytest.raises(TypeError):
        wire_json({"when": object()})


def test_read_json_reads_what_json_read() -> None:
    rng = random.Random(6)
    for _ in range(2000):
        v = value(rng)
        text = json.dumps(v, ensure_ascii=rng.random() < 0.5)
        assert read_json(text) == json.loads(text)
        assert read_json(text.encode("utf-8")) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"x": NaN}', "nan"),
        ('{"x": Infinity}', "inf"),
        ('"\\ud800"', "\ud800"),
        ('{"x": 1}'.encode("utf-16"), {"x": 1}),
        ('{"x": 123456789012345678901234567890}', {"x": 123456789012345678901234567890}),
        (
            b'[-9999999999999999999, "1234567890123456789"]',
            [-9999999999999999999, "1234567890123456789"],
        ),
        ('{"x": 1e400}', "inf"),
    ],
)
def test_read_json_still_takes_what_only_json_took(text: str | bytes, expected: Any) -> None:
    got = read_json(text)
    if isinstance(got, dict) and isinstance(got.get("x"), float):
        assert str(got["x"]) == expected
    else:
        assert got == expected
        assert [type(v) for v in _leaves(got)] == [type(v) for v in _leaves(expected)]


def _leaves(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return [leaf for item in v.values() for leaf in _leaves(item)]
    if isinstance(v, list):
        return [leaf for item in v for leaf in _leaves(item)]
    return [v]


def test_read_json_raises_json_s_value_error() -> None:
    with pytest.raises(json.JSONDecodeError, match="Expecting"):
        read_json('{"x": ')


def test_a_reply_in_prose_is_still_found() -> None:
    assert extract_json_object('Here: ```json\n{"a": [1, "é"]}\n``` done') == {"a": [1, "é"]}
    assert extract_json_object('{"a": NaN}')["a"] != 0


class Colour(enum.Enum):
    RED = 1


class Risk(str, enum.Enum):
    LOW = "low"


def canonical(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def test_stable_json_is_json_s_canonical_text_for_any_value() -> None:
    rng = random.Random(7)
    odd: list[Any] = [1e-07, 1e16, 2.5, float("nan"), Colour.RED, Risk.LOW, uuid.UUID(int=5)]
    odd += [2**70, ("a", 1), {"é": 1, "z": 2, "a": 3, "\U0001f600": 4, "\u00ff": 5}, {1: "a"}]
    for _ in range(3000):
        v = value(rng)
        if rng.random() < 0.3:
            v = [v, rng.choice(odd)] if rng.random() < 0.5 else {"k": v, "o": rng.choice(odd)}
        assert outcome(stable_json, v) == outcome(canonical, v)


def outcome(fn: Any, v: Any) -> Any:
    """What ``fn`` made of ``v``: its text, or the type of its error (mixed key types)."""
    try:
        return fn(v)
    except TypeError as exc:
        return type(exc)


def test_stable_json_of_a_cycle_or_a_lone_surrogate_is_what_json_made_of_it() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular"):
        stable_json(cycle)
    assert stable_json(["\ud800"]) == canonical(["\ud800"])
