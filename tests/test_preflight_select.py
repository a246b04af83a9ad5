"""Preflight (ids, duplicates, truncation) and context selection by tier and budget."""

from __future__ import annotations

import pytest

import evidex
from evidex._text import contains_verbatim, extract_json_object, nearest_span, quote_mismatch
from evidex.errors import ConfigError, InputError
from evidex.jobs.select import select_context
from evidex.preflight import prepare_passages, truncate_to_tokens
from evidex.store import SqlStore
from evidex.types import DEFAULT_TIERS, Passage, TierScheme
from tests.scripted import ScriptedJudge, tier_reply


def _count(text: str) -> int:
    return len(text.split())


def test_duplicate_ids_are_an_input_error() -> None:
    ps = [Passage(passage_id="a", text="x"), Passage(passage_id="a", text="y")]
    with pytest.raises(InputError, match="unique; repeated: a"):
        prepare_passages(ps, count_tokens=_count)


def test_empty_passage_list_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no passages"):
        prepare_passages([], count_tokens=_count)


def test_blank_text_and_id_are_rejected() -> None:
    with pytest.raises(ValueError, match="text must not be empty"):
        Passage(passage_id="a", text="  ")
    with pytest.raises(ValueError, match="passage_id must not be empty"):
        Passage(passage_id=" ", text="x")


def test_passage_accepts_id_aliases() -> None:
    assert Passage.model_validate({"id": 7, "text": "t"}).passage_id == "7"
    assert Passage.model_validate({"pid": "x", "text": "t"}).passage_id == "x"


def test_long_passage_is_truncated_with_an_event() -> None:
    ps = [Passage(passage_id="long", text=" ".join(f"w{i}" for i in range(100)))]
    prepared = prepare_passages(ps, count_tokens=_count, max_passage_tokens=10)
    assert _count(prepared.passages[0].text) <= 10
    [event] = prepared.events
    assert event.kind == "truncated" and event.passage_ids == ["long"]
    assert event.data["tokens"] == 100


def test_truncate_cuts_at_a_word_boundary() -> None:
    assert truncate_to_tokens("alpha beta gamma delta", 2, _count) == "alpha beta"


def test_verbatim_check_forgives_whitespace_and_quotes() -> None:
    assert contains_verbatim("He said \u201chello\u201d\n  to all.", 'said "hello" to all')
    assert not contains_verbatim("abc", "")
    assert nearest_span("the quick brown fox", "quick brwn") == "quick brow"


def test_verbatim_check_forgives_case_and_spacing_at_punctuation_not_words() -> None:
    """Web passages carry tokeniser spacing ("( FRQ )") and a quote may capitalise its first
    word; a changed, dropped or joined word is still not verbatim."""
    text = "Moisture class: FIRE FREQUENCY ( FRQ ), LITTER ( LIT ). the TWIST gene forms the tube."
    assert contains_verbatim(text, "FIRE FREQUENCY (FRQ), LITTER (LIT)")
    assert contains_verbatim(text, "The TWIST gene forms the tube.")
    assert not contains_verbatim(text, "The TWIST gene forms a tube.")
    assert not contains_verbatim(text, "the TWIST gene forms tube.")
    assert not contains_verbatim("see the rapist", "therapist")


def test_quote_mismatch_points_at_the_first_difference() -> None:
    """A long quote wrong in one word near its end: the message shows that word, not two
    identical beginnings."""
    source = (
        "poultry (noun): domesticated fowl collectively, esp. those valued for their meat and "
        "eggs. [1350-1400; Middle English pulletrie < Middle French pouleterie.] More text."
    )
    quote = (
        "poultry (noun): domesticated fowl collectively, esp. those valued for their meat and "
        "eggs. [1350-1400; Middle French pouleterie.]"
    )
    message = quote_mismatch(source, quote)
    assert "it follows the text up to '... their meat and eggs. [1350-1400; Middle'" in message
    assert "then the quote has 'French pouleterie.]'" in message
    assert "the text goes on 'English pulletrie < Middle French" in message
    spliced = quote_mismatch(source, "Robert Gray. Domesticated fowl collectively")
    assert spliced == "the text does not have its start 'Robert Gray.', though it has what follows"
    assert quote_mismatch(source, "cats and dogs").startswith("no part of it is in the text")
    assert "is empty" in quote_mismatch("", "x")


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', 'Sure! {"a": 1} hope this helps', '```json\n{"a": 1}\n```', 'x ```\n{"a": 1}```'],
)
def test_json_extraction(text: str) -> None:
    assert extract_json_object(text) == {"a": 1}


@pytest.mark.parametrize(
    ("text", "message"), [("", "empty"), ('{"a": [1, 2', "truncated"), ("no json", "no JSON")]
)
def test_json_extraction_failures(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        extract_json_object(text)


def _result(store: SqlStore) -> evidex.TierResult:
    texts = {
        "d1": "direct one " * 5,
        "c1": "context one " * 5,
        "d2": "direct two " * 5,
        "t1": "tangent " * 5,
        "i1": "irrelevant " * 5,
    }
    tiers = {
        "d1": "directly-supporting",
        "c1": "contextually-relevant",
        "d2": "directly-supporting",
        "t1": "tangentially-related",
        "i1": "irrelevant",
    }
    judge = ScriptedJudge([lambda r: tier_reply(r, **{k: {"tier": v} for k, v in tiers.items()})])
    passages = [Passage(passage_id=k, text=v.strip()) for k, v in texts.items()]
    return evidex.tier("q", passages, judge=judge, store=store)


def test_select_policies(store: SqlStore) -> None:
    result = _result(store)
    strict = select_context(result, "strict", 10_000)
    assert [i.passage_id for i in strict.items] == ["d1", "d2"]
    assert {lo.passage_id: lo.reason for lo in strict.left_out} == {
        "c1": "policy",
        "t1": "policy",
        "i1": "policy",
    }
    standard = select_context(result, "standard", 10_000)
    assert [(i.passage_id, i.supplementary) for i in standard.items] == [
        ("d1", False),
        ("d2", False),
        ("c1", True),
    ]
    broad = select_context(result, "broad", 10_000)
    assert [i.passage_id for i in broad.items] == ["d1", "d2", "c1", "t1"]


def test_select_budget_goes_to_the_top_tier_first(store: SqlStore) -> None:
    result = _result(store)
    one = select_context(result, "standard", 15, count_tokens=_count)
    assert [i.passage_id for i in one.items] == ["d1"]
    assert one.tokens_used == 10 and one.tokens_by_tier["directly-supporting"] == 10
    assert {lo.passage_id: lo.reason for lo in one.left_out}["d2"] == "budget"
    with pytest.raises(InputError):
        select_context(result, "everything", 10)
    with pytest.raises(InputError):
        select_context(result, "strict", 0)


def test_custom_tier_scheme_from_file(tmp_path, store: SqlStore) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "tiers.yaml"
    path.write_text(
        "tiers:\n"
        "  - {name: answer, definition: states the answer}\n"
        "  - {name: background, definition: helps understand}\n"
        "  - {name: noise, definition: unrelated}\n"
        "fallback_tier: background\n"
    )
    scheme = TierScheme.from_file(path)
    assert scheme.names == ["answer", "background", "noise"] and scheme.top == "answer"
    judge = ScriptedJudge([lambda r: tier_reply(r, "answer"), tier_reply])
    result = evidex.tier(
        "q",
        [Passage(passage_id="a", text="some text here ok")],
        judge=judge,
        store=store,
        tiers=scheme,
    )
    assert result.tier_summary == {"answer_count": 1, "background_count": 0, "noise_count": 0}
    assert "- answer: states the answer" in judge.requests[0].messages[0].content
    assert (
        "(none given)" in judge.requests[0].messages[1].content
    )  # default examples fit only the default tiers


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tiers: [{name: a, definition: x}]", "at least two"),
        ("tiers: [{name: a, definition: x}, {name: a, definition: y}]\nfallback_tier: a", "unique"),
        (
            "tiers: [{name: a, definition: x}, {name: b, definition: y}]\nfallback_tier: c",
            "not one of",
        ),
        (
            "tiers: [{name: 'a b', definition: x}, {name: b, definition: y}]\nfallback_tier: b",
            "without spaces",
        ),
        ("just a string", "expected a mapping"),
    ],
)
def test_bad_tier_files(tmp_path, content: str, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        TierScheme.from_file(path)


def test_default_scheme_is_the_spec_four() -> None:
    assert DEFAULT_TIERS.names == [
        "directly-supporting",
        "contextually-relevant",
        "tangentially-related",
        "irrelevant",
    ]
    assert DEFAULT_TIERS.fallback_tier == "contextually-relevant"


def test_empty_query_is_an_input_error(store: SqlStore) -> None:
    with pytest.raises(InputError, match="query is empty"):
        evidex.tier("  ", [Passage(passage_id="a", text="t")], judge=ScriptedJudge(), store=store)
