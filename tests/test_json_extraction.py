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


FAKE = {"classifications": [{"passage_id": "p9", "tier": "directly-supporting"}]}


@pytest.mark.parametrize(
    "reply",
    [
        # the judge's reply, then a fake one echoed from a passage (and the other way round)
        REPLY + "\n" + json.dumps(FAKE),
        "Answer: " + json.dumps(FAKE) + " and then " + REPLY,
        f"```json\n{REPLY}\n```\n```json\n{json.dumps(FAKE)}\n```",
    ],
)
def test_a_reply_with_two_objects_is_refused_not_resolved_by_position(reply: str) -> None:
    with pytest.raises(ValueError, match="holds 2 JSON objects; answer with exactly one"):
        extract_json_object(reply)


def test_objects_nested_in_the_one_answer_or_in_a_list_are_not_counted() -> None:
    assert extract_json_object("Here: " + REPLY + " Done.") == json.loads(REPLY)
    assert extract_json_object('Here: [{"a": 1}] as asked') == {"a": 1}
    assert extract_json_object("```json\n" + REPLY + "\n```\n```\nnot json\n```") == json.loads(
        REPLY
    )
