"""A template renders to the text the regex substitution gave, and its version stays the hash
of its texts: both are computed once per template now, and a judge reads the one while cached
judgments are keyed by the other."""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re

import pytest

from evidex.tasks.audit.steps import CLASSIFY_TEMPLATE, ONE_PASS_TEMPLATE
from evidex.tasks.base import PromptTemplate
from evidex.tasks.tier import TIER_TEMPLATE

_SLOT = re.compile(r"\[([A-Z_]+)\]")


def by_regex(template: PromptTemplate, values: dict[str, str]) -> tuple[str, str]:
    def fill(text: str) -> str:
        return _SLOT.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    return fill(template.system), fill(template.user)


TEMPLATES = [TIER_TEMPLATE, ONE_PASS_TEMPLATE, CLASSIFY_TEMPLATE]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_rendering_matches_the_regex_substitution(template: PromptTemplate) -> None:
    rng = random.Random(7)
    names = sorted(template.placeholders())
    for _ in range(50):
        # values holding slot-like text, brackets and backslashes are put in as they are
        values = {
            n: rng.choice(["", "x", "[QUERY]", "a\\1b", "[[", "]", "line\nline", "\u00e9"]) * 3
            for n in names
        }
        values["UNUSED"] = "never shown"
        system, user = template.render(values)
        assert (system.content, user.content) == by_regex(template, values)


def test_a_slot_without_a_value_is_named_and_a_custom_slot_is_kept() -> None:
    template = PromptTemplate(name="t", system="S [A] [lower]", user="U [B][A]")
    with pytest.raises(KeyError, match=r"\['B'\]"):
        template.render({"A": "1"})
    system, user = template.render({"A": "1", "B": "2"})
    assert (system.content, user.content) == ("S 1 [lower]", "U 21")


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_the_version_is_the_hash_of_every_text_and_follows_an_edit(
    template: PromptTemplate,
) -> None:
    text = "\x1e".join(
        [template.name, template.system, template.user, template.reask, template.strict]
    )
    assert template.version == hashlib.sha256(text.encode()).hexdigest()[:16]
    edited = dataclasses.replace(template, strict=template.strict + " ")
    assert edited.version != template.version
