"""The passages data block of every prompt: its text is json.dumps(indent=1) to the byte, since
a judge reads it and a cached judgment was made with it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from evidex.tasks.base import passages_json


def _reference(items: list[Any]) -> str:
    return json.dumps(items, ensure_ascii=False, indent=1)


def test_random_passages_lay_out_as_json_dumps_does() -> None:
    rng = random.Random(3)
    alphabet = ["a", " ", '"', "\\", "\n", "\t", "\x00", "\u00e9", "\u2028", "\U0001f600", "/", "{"]
    for _ in range(500):
        items = [
            {
                "passage_id": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))),
                "text": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))),
            }
            for _ in range(rng.randint(1, 6))
        ]
        assert passages_json(items) == _reference(items)
        assert json.loads(passages_json(items)) == items


@pytest.mark.parametrize(
    "items",
    [
        [],
        [{}],
        [{"passage_id": "p1", "score": 2}],
        [{"passage_id": "p1", "text": None}],
        [{"passage_id": "p1", "text": ["nested"]}],
        [{"passage_id": "p1", "text": "a"}, "not an object"],
        [{"passage_id": "p1", "text": "a", "meta": {"k": "v"}}],
    ],
)
def test_other_shapes_fall_back_to_json_dumps(items: list[Any]) -> None:
    assert passages_json(items) == _reference(items)
