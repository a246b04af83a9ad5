"""A step's cache text is the canonical JSON of its cache material, however it is built: the
tier step serialises its scheme and examples once per run and splices them, and the key it
hashes must stay what it was (caches written before stay valid)."""

from __future__ import annotations

import random

from evidex._text import stable_json
from evidex.tasks.tier import DEFAULT_EXAMPLES, TierBatch, TierExample, TierStep
from evidex.types import DEFAULT_TIERS, Passage, RiskLevel, TierDefinition, TierScheme

ALPHABET = ["a", " ", '"', "\\", "\n", "\u00e9", "\U0001f600", "/", "{", "  "]


def text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, n)))


def test_the_tier_cache_text_is_the_canonical_json_of_its_material() -> None:
    rng = random.Random(11)
    two = TierScheme(
        tiers=(
            TierDefinition(name="on-topic", definition="about the query"),
            TierDefinition(name="off-topic", definition="not about it"),
        ),
        fallback_tier="off-topic",
    )
    own = (
        TierExample(
            query="q \u00e9",
            passage="p",
            tier="on-topic",
            justification="j",
            key_evidence_snippet=None,
        ),
    )
    step = TierStep()
    for _ in range(200):
        scheme, examples = rng.choice(
            [(DEFAULT_TIERS, DEFAULT_EXAMPLES), (DEFAULT_TIERS, ()), (two, own)]
        )
        batch = TierBatch(
            query=" q" + text(rng, 20) + " ",
            passages=tuple(
                Passage(passage_id=text(rng, 4) + str(i), text="x" + text(rng, 60))
                for i in range(rng.randint(1, 5))
            ),
            scheme=scheme,
            examples=examples,
            risk=rng.choice(list(RiskLevel)),
        )
        assert step.cache_text(batch) == stable_json(step.cache_material(batch))


def test_derived_values_follow_the_objects_not_their_ids() -> None:
    step = TierStep()
    made: list[str] = []

    def make(tag: str) -> str:
        made.append(tag)
        return tag

    first = [1]
    assert step.derived("v", (first,), lambda: make("a")) == "a"
    assert step.derived("v", (first,), lambda: make("b")) == "a"  # same object: computed once
    assert step.derived("v", ([1],), lambda: make("c")) == "c"  # an equal but other object
    assert step.derived("w", (first,), lambda: make("d")) == "d"  # another kind of value
    assert made == ["a", "c", "d"]
