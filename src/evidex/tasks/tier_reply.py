"""The shape of a tier reply: its JSON schema, the bounds on its free text, and the
``max_tokens`` that follows from them for a batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evidex.tasks.base import exact_array
from evidex.types import TierScheme

__all__ = ["JUSTIFICATION_MAX_CHARS", "SNIPPET_MAX_CHARS", "reply_schema", "reply_tokens"]

JUSTIFICATION_MAX_CHARS = 300
"""The longest justification a reply may give: the prompt asks for one sentence of at most 25
words, and the schema bounds it, so a judge with constrained decoding cannot write on, and the
reply's size, hence ``max_tokens``, is known from the batch."""
SNIPPET_MAX_CHARS = 400
"""The longest key_evidence_snippet the schema allows: a constrained decoder stops there (a
prefix of a long sentence is still verbatim). The validator does not refuse a longer one from
a judge that ignores the bound: a long verbatim span is evidence all the same, and refusing it
only turns a correct grade into a re-ask."""
_ENTRY_CHARS = 100
"""Characters of one reply entry besides its id, tier, justification and snippet: keys,
quotes, commas, spaces."""
_CHARS_PER_TOKEN = 3
"""Fewer than the usual 4 characters per token of English text: JSON punctuation and copied
spans tokenise worse, and a limit set too low cuts the reply off."""


def reply_tokens(scheme: TierScheme, passage_ids: Sequence[str]) -> int:
    """``max_tokens`` for the reply to a batch: the longest reply the schema allows (each
    entry at its bounds, the summary's counts), so a valid reply is never cut off, and a
    larger batch gets a larger limit."""
    tier = max(len(n) for n in scheme.names)
    entries = sum(
        _ENTRY_CHARS + len(pid) + tier + JUSTIFICATION_MAX_CHARS + SNIPPET_MAX_CHARS
        for pid in passage_ids
    )
    summary = sum(len(scheme.count_key(n)) + 8 for n in scheme.names) + 40
    return -(-(entries + summary) // _CHARS_PER_TOKEN)


def reply_schema(scheme: TierScheme, passage_ids: Sequence[str]) -> dict[str, Any]:
    """JSON schema of a reply, with the batch's ids and the tier names as enums.

    Judges with constrained decoding use it to make invented ids and tiers impossible; the
    validator still checks everything, since not every server enforces a schema.
    """
    return {
        "type": "object",
        "properties": {
            "classifications": exact_array(
                {
                    "type": "object",
                    "properties": {
                        "passage_id": {"type": "string", "enum": list(passage_ids)},
                        "tier": {"type": "string", "enum": scheme.names},
                        "justification": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": JUSTIFICATION_MAX_CHARS,
                        },
                        # anyOf, not a type list: grammar builders (llama.cpp's) drop the
                        # bound of a type list
                        "key_evidence_snippet": {
                            "anyOf": [
                                {"type": "string", "maxLength": SNIPPET_MAX_CHARS},
                                {"type": "null"},
                            ]
                        },
                    },
                    "required": ["passage_id", "tier", "justification", "key_evidence_snippet"],
                    "additionalProperties": False,
                },
                len(passage_ids),
            ),
            "tier_summary": {
                "type": "object",
                "properties": {scheme.count_key(n): {"type": "integer"} for n in scheme.names},
            },
        },
        "required": ["classifications"],
    }
