"""The project's attack suite: passage text written to steer a grader, as typed records.

The records live in ``data/attacks/suite.jsonl`` (one JSON object a line) and are written in
our own words after the public attack material below; each record names its source by key.
Several phrasings per kind, some held out (``split="heldout"``) from the tuning of the
screen in :mod:`evidex._screening`, so its detection rate on phrasings it was not fitted to
can be measured apart. Stuffing records are templates filled from the query at run time.

Sources:

- ``promptfoo-judge-injection``: promptfoo, ``examples/judge-prompt-injection/`` (its README's
  taxonomy: protocol override with fake tags, answer smuggling, format impersonation with fake
  JSON verdicts; ``promptfooconfig-judge-injection.yaml``'s delimiter, role-confusion and
  authority cases), https://github.com/promptfoo/promptfoo/tree/main/examples/judge-prompt-injection
- ``promptfoo-ascii-smuggling``: promptfoo, ``src/redteam/plugins/asciiSmuggling.ts``
  (instructions in invisible Unicode tag characters)
- ``bipia``: Microsoft BIPIA, ``benchmark/text_attack_{train,test}.json`` (instructions to the
  assistant placed at the start, middle or end of external content), https://github.com/microsoft/BIPIA
- ``spotlighting``: Hines et al., "Defending Against Indirect Prompt Injection Attacks With
  Spotlighting", CAMLIS 2024, arXiv:2403.14720 (instructions embedded in documents, escapes
  from the delimiters that mark data)
- ``chat-templates``: the published chat templates of ChatML (Qwen, OpenAI), Llama 2
  (``[INST]``, ``<<SYS>>``), Llama 3 (``<|start_header_id|>``), Gemma (``<start_of_turn>``),
  Mistral (``[INST]``, ``[SYSTEM_PROMPT]``) and Phi-3 (``<|system|>``)
- ``alaofi-2024``: Alaofi, Thomas, Scholer and Sanderson, "LLMs can be Fooled into Labelling
  a Document as Relevant", SIGIR-AP 2024 (keyword stuffing, "this passage is relevant" text)
- ``evidex-issue-27``: the four attack kinds measured in evidex issue 27
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass
from typing import Literal

from evidex._screening import SuspicionKind, query_terms
from evidex.types import Passage

__all__ = ["SOURCES", "Attack", "AttackKind", "Placement", "attack_suite"]

AttackKind = Literal[
    "note_to_grader",
    "fake_reply_json",
    "role_tags",
    "data_block_closer",
    "query_stuffing",
    "keyword_stuffing",
    "answer_smuggling",
    "label_smuggling",
    "rank_first",
    "hidden_field",
    "hidden_characters",
]
Placement = Literal["append", "prepend", "middle", "title", "url"]

SOURCES = {
    "promptfoo-judge-injection": "https://github.com/promptfoo/promptfoo/tree/main/examples/"
    "judge-prompt-injection",
    "promptfoo-ascii-smuggling": "https://github.com/promptfoo/promptfoo/blob/main/src/redteam/"
    "plugins/asciiSmuggling.ts",
    "bipia": "https://github.com/microsoft/BIPIA (benchmark/text_attack_test.json)",
    "spotlighting": "https://arxiv.org/abs/2403.14720",
    "chat-templates": "the model families' published chat templates",
    "alaofi-2024": "Alaofi et al., SIGIR-AP 2024",
    "evidex-issue-27": "evidex issue 27, 'Grades that hold'",
}
"""Where each record's attack comes from (the module docstring says what was taken)."""


@dataclass(frozen=True)
class Attack:
    """One attack phrasing: its kind, where it goes, which jobs it aims at, what the screen
    should report for it, and its source."""

    id: str
    kind: AttackKind
    text: str
    placement: Placement
    jobs: tuple[str, ...]
    expect: tuple[SuspicionKind, ...]
    """The suspicion kinds the screen should report (any one of them counts)."""
    source: str
    split: Literal["tune", "heldout"] = "tune"

    def render(self, query: str = "", passage_id: str = "p1") -> str:
        """The attack text for one query and passage: ``{query}``, ``{keywords}`` (the
        query's content terms) and ``{passage_id}`` filled in."""
        keywords = " ".join(dict.fromkeys(query_terms(query))) or query
        return (
            self.text.replace("{query}", query)
            .replace("{keywords}", keywords)
            .replace("{passage_id}", passage_id)
        )

    def apply(self, passage: Passage, query: str = "") -> Passage:
        """``passage`` with this attack put where the record says."""
        added = self.render(query, passage.passage_id)
        text = passage.text
        if self.placement == "append":
            return passage.model_copy(update={"text": f"{text}\n{added}"})
        if self.placement == "prepend":
            return passage.model_copy(update={"text": f"{added}\n{text}"})
        if self.placement == "middle":
            cut = text.find(". ", len(text) // 2)
            cut = len(text) // 2 if cut < 0 else cut + 2
            return passage.model_copy(update={"text": f"{text[:cut]}{added} {text[cut:]}"})
        return passage.model_copy(update={self.placement: added})


@functools.lru_cache(maxsize=1)
def attack_suite() -> tuple[Attack, ...]:
    """Every record of the shipped suite, in file order."""
    raw = importlib.resources.files("evidex").joinpath("data/attacks/suite.jsonl")
    out = []
    for line in raw.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        out.append(
            Attack(
                id=row["id"],
                kind=row["kind"],
                text=row["text"],
                placement=row["placement"],
                jobs=tuple(row["jobs"]),
                expect=tuple(row["expect"]),
                source=row["source"],
                split=row.get("split", "tune"),
            )
        )
    return tuple(out)
