"""JSON extraction from a reply cut off by the token limit: the re-ask must say "truncated",
not complain about the shape of a fragment picked from inside the unfinished object."""

from __future__ import annotations

import json

import pytest

from evidex._text import extract_json_object

REPLY = json.dumps(
    {
        "classifications": [
            {"passage_id": "p1", "justification": 'it says "600 IU {daily}" \\ plainly'},
            {"passage_id": "p2", "justification": "background only"},
        ]
    }
)


@pytest.mark.parametrize("cut", range(2, len(REPLY)))
def test_a_cut_off_reply_is_reported_as_truncated(cut: int) -> None:
    with pytest.raises(ValueError, match="truncated"):
        extract_json_object("Here you go: " + REPLY[:cut])


def test_the_whole_reply_still_parses_with_prose_and_stray_braces_before_it() -> None:
    assert extract_json_object("Use {x} as a slot. " + REPLY) == json.loads(REPLY)
