"""Passages as users have them: plain strings, dicts with extra keys, LangChain- and
Haystack-shaped dicts; and every result gives each passage's text and metadata back."""

from __future__ import annotations

import pytest

import evidex
from evidex.errors import InputError
from evidex.harness.runner import HarnessSettings
from evidex.preflight import coerce_passages, passage_fields
from evidex.store import SqlStore
from evidex.types import Passage
from tests.scripted import ScriptedJudge, rank_reply, tier_reply

FAST = HarnessSettings(backoff_s=0.0)


def test_plain_strings_get_ids_by_position_the_same_every_time() -> None:
    texts = ["Vitamin D is made in the skin.", "Calcium needs vitamin D.", "D-Day was in 1944."]
    first = coerce_passages(texts)
    assert [p.passage_id for p in first] == ["passage-1", "passage-2", "passage-3"]
    assert [p.text for p in first] == texts and all(p.metadata == {} for p in first)
    assert coerce_passages(texts) == first


def test_a_dict_without_an_id_gets_its_position_and_ids_given_are_kept() -> None:
    passages = coerce_passages([{"text": "a"}, {"id": 7, "text": "b"}, "c"])
    assert [p.passage_id for p in passages] == ["passage-1", "7", "passage-3"]


def test_extra_keys_are_kept_as_metadata() -> None:
    [p] = coerce_passages(
        [{"id": "d1", "text": "t", "source": "kb/a.pdf", "page": 3, "url": "https://x.example"}]
    )
    assert p.passage_id == "d1" and p.url == "https://x.example"
    assert p.metadata == {"source": "kb/a.pdf", "page": 3}


def test_an_explicit_metadata_mapping_wins_over_an_extra_key() -> None:
    [p] = coerce_passages(
        [{"text": "t", "source": "extra", "metadata": {"source": "given", "k": 1}}]
    )
    assert p.metadata == {"source": "given", "k": 1}
    [q] = coerce_passages([{"text": "t", "metadata": None}])
    assert q.metadata == {}


def test_langchain_shaped_dicts_take_page_content_as_text() -> None:
    doc = {"id": None, "page_content": "Most adults need 600 IU.", "metadata": {"source": "nih"}}
    doc["type"] = "Document"
    [p] = coerce_passages([doc])
    assert p.passage_id == "passage-1"  # a None id counts as no id
    assert p.text == "Most adults need 600 IU." and p.metadata == {
        "source": "nih",
        "type": "Document",
    }


def test_haystack_shaped_dicts_take_content_as_text_and_keep_the_score() -> None:
    [p] = coerce_passages([{"id": "h1", "content": "Most adults need 600 IU.", "score": 0.8}])
    assert (p.passage_id, p.text, p.score) == ("h1", "Most adults need 600 IU.", 0.8)


def test_text_wins_and_the_other_text_keys_and_ids_stay_in_metadata() -> None:
    fields = passage_fields({"passage_id": "a", "id": "b", "text": "t", "page_content": "pc"})
    assert fields == {"passage_id": "a", "text": "t", "metadata": {"id": "b", "page_content": "pc"}}


def test_passage_objects_pass_through_unchanged() -> None:
    given = Passage(passage_id="x", text="t", metadata={"k": 1})
    assert coerce_passages([given])[0] is given


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ({"source": "no text"}, "text"),
        ({"text": "  "}, "text must not be empty"),
        ({"text": "t", "metadata": ["not", "a", "mapping"]}, "metadata"),
        (42, "expected a string, a mapping or a Passage, got int"),
    ],
)
def test_a_malformed_passage_is_an_input_error_naming_its_position(item: object, why: str) -> None:
    with pytest.raises(InputError, match=rf"passage 2 is not a valid passage.*{why}"):
        coerce_passages(["fine", item])  # type: ignore[list-item]


def test_rerank_results_carry_each_passage_text_and_metadata(store: SqlStore) -> None:
    docs = [
        {"text": "Vitamin D helps absorb calcium.", "source": "a.pdf"},
        {"text": "Adults need 600 IU of vitamin D.", "source": "b.pdf"},
    ]
    judge = ScriptedJudge([rank_reply(["passage-2"])])
    result = evidex.rerank(
        "vitamin D dose", docs, judge=judge, store=store, strategy="allpairs", settings=FAST
    )
    top = result.ranked_passages[0]
    assert top.passage_id == "passage-2"
    assert result.passage(top.passage_id).text == "Adults need 600 IU of vitamin D."
    assert result.passage(top.passage_id).metadata == {"source": "b.pdf"}
    assert [p.passage_id for p in result.passages] == ["passage-1", "passage-2"]
    assert "passages" not in result.report()  # the JSON output and HTTP contract are unchanged
    with pytest.raises(KeyError):
        result.passage("passage-9")


def test_tier_results_carry_each_passage_text_and_metadata(store: SqlStore) -> None:
    docs = ["Adults need 600 IU of vitamin D.", {"page_content": "Sunlight.", "metadata": {"p": 2}}]
    result = evidex.tier("vitamin D dose", docs, judge=ScriptedJudge([tier_reply]), store=store)
    assert [a.passage_id for a in result.classifications] == ["passage-1", "passage-2"]
    assert result.passage("passage-2").text == "Sunlight."
    assert result.passage("passage-2").metadata == {"p": 2}


def test_classify_results_carry_each_passage_text_and_metadata(store: SqlStore) -> None:
    from tests import classify_fixtures as cf

    docs = [
        {**p.model_dump(exclude={"metadata"}), "source": f"kb/{p.passage_id}"} for p in cf.PASSAGES
    ]
    judge = ScriptedJudge([cf.reply()])
    result = evidex.classify(cf.INPUT, docs, cf.TAXONOMY, judge=judge, store=store)
    [evidence] = result.classifications[0].supporting_evidence
    assert result.passage(evidence.passage_id).metadata == {"source": "kb/p1"}
    assert result.passage("p3").text == cf.PASSAGES[2].text
    assert "passages" not in result.report()


def test_audit_results_carry_each_passage_text_and_metadata(store: SqlStore) -> None:
    from tests import audit_fixtures as af

    docs = [{"text": p.text, "page": n} for n, p in enumerate(af.PASSAGES, 1)]  # ids by position
    judge = ScriptedJudge([af.reply(af.supported(), af.inferred(), af.contradicted())])
    result = evidex.audit(af.ANSWER, docs, question=af.QUESTION, judge=judge, store=store)
    [cited] = result.claims[0].supporting_context_ids
    assert result.passage(cited).text == af.PASSAGES[0].text
    assert result.passage(cited).metadata == {"page": 1}
    assert [p.passage_id for p in result.passages] == ["passage-1", "passage-2", "passage-3"]
    assert "passages" not in result.report()
