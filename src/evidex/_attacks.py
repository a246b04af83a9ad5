"""The project's attack suite: passage text written to steer a grader, as typed records.

The records live in two files of ``data/attacks/`` (one JSON object a line), each record
written in our own words after the public attack material below and naming its source by key:

- ``suite.jsonl``: several phrasings per kind, most of them the phrasings the screen of
  :mod:`evidex._screening` was tuned on (``split="tune"``), some held out from that tuning
  (``split="heldout"``), written by the same hand after the patterns were fixed;
- ``public_heldout.jsonl``: the **frozen held-out set**, every record ``split="heldout"``:
  60 phrasings paraphrased from the public material (promptfoo's judge-injection configs:
  authority tags, plausible rationales, self-reference, pleas, threats, flattery, fake system
  state, YAML and plain-text verdicts, CDATA; BIPIA's "in your response" register; Greshake et
  al.'s markdown and HTML-comment carriers; injections written in German, French and Spanish),
  committed before any screen change that it measures and never used to tune one. Its hash is
  pinned by a test, so it cannot drift to fit the screen.

Held-out records measure detection on phrasings the screen was not fitted to
(bench/injection_screen.py reports each file apart). Stuffing records are templates filled
from the query at run time.

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
- ``greshake-2023``: Greshake, Abdelnabi, Mishra, Endres, Holz and Fritz, "Not what you've
  signed up for: Compromising Real-World LLM-Integrated Applications with Indirect Prompt
  Injection", AISec 2023, arXiv:2302.12173 (instructions hidden in web pages: markdown
  pseudo-system blocks, HTML comments)
- ``deepset-prompt-injections``: deepset's ``prompt-injections`` data set (Apache-2.0),
  https://huggingface.co/datasets/deepset/prompt-injections (injections written in languages
  other than English; the genre is taken, not its rows)
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass
from typing import Literal

from evidex._screening import SuspicionKind, query_terms
from evidex.types import Passage

__all__ = ["COLLECTIONS", "SOURCES", "Attack", "AttackKind", "Placement", "attack_suite"]

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
    "greshake-2023": "https://arxiv.org/abs/2302.12173",
    "deepset-prompt-injections": "https://huggingface.co/datasets/deepset/prompt-injections",
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
    collection: str = "suite"
    """The file the record comes from (:data:`COLLECTIONS`): ``suite`` or ``public_heldout``."""

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


COLLECTIONS = ("suite", "public_heldout")
"""The files of ``data/attacks/`` (without ``.jsonl``), in the order :func:`attack_suite` reads."""


@functools.lru_cache(maxsize=1)
def attack_suite() -> tuple[Attack, ...]:
    """Every record of the shipped suite, file by file (:data:`COLLECTIONS`), in file order."""
    out = []
    for collection in COLLECTIONS:
        raw = importlib.resources.files("evidex").joinpath(f"data/attacks/{collection}.jsonl")
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
                    collection=collection,
                )
            )
    return tuple(out)
