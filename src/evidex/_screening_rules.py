"""The patterns of the injection screen (:mod:`evidex._screening`), as data: one table per
suspicion kind, each entry a rule name and its compiled pattern.

They were written for the tuned phrasings of the project's attack suite (``evidex._attacks``)
and checked against relevant TREC DL and LLMJudge passages, which legitimately quote JSON,
say "relevant" and name judges and reviewers: an addressee that honest text also names counts
only when the sentence points at this passage, and a JSON key counts only when it is a reply
key or carries a grade.
"""

from __future__ import annotations

import re

__all__ = ["ADDRESS_RULES", "HIDDEN", "REPLY_RULES", "ROLE_RULES", "Rule"]

Rule = tuple[str, "re.Pattern[str]"]

# -- the words the patterns are built from ---------------------------------------------------

_W = r"[\s_\-+]+"  # between words; URLs and slugs separate them with - _ +
_ROLE = (
    r"(?:grader|grading(?:_|\s)(?:model|system|assistant|ai)|evaluator|assessor|rater|"
    r"re-?ranker|ranker|ranking(?:_|\s)(?:model|system)|auditor|fact-?checker|verifier|"
    r"relevance(?:_|\s)(?:judge|model|assessor|system|grader)|llm(?:_|\s)judge|ai(?:_|\s)judge|"
    r"judging(?:_|\s)model|scoring(?:_|\s)model)s?"
)
# addressees that honest text also names (a court's judge, a paper's reviewer, an ML model):
# they count only when the same sentence points at this passage
_SOFT_ROLE = (
    r"(?:judge|reviewer|annotator|classifier|model|assistant|ai|llm|language(?:_|\s)model|"
    r"chatbot|system)s?"
)
_THIS = (
    r"(?:this|the(?:\s+present|\s+following|\s+above)?|that)(?:" + _W + r")(?:passage|document|"
    r"doc|text|result|snippet|source|page|chunk|excerpt|entry|item|evidence|article|context)"
)
_TIERS = (
    r"(?:directly[\s_\-]*supporting|contextually[\s_\-]*relevant|tangentially[\s_\-]*related|"
    r"fully[\s_]supported|not[\s_]enough[\s_]info)"
)
_GOOD = (
    r"(?:" + _TIERS + r"|(?:highly|most|very|perfectly|directly|fully|maximally|extremely|"
    r"entirely|completely|100%)" + _W + r"relevant|relevant|the\s+(?:top|highest|best|first|"
    r"maximum)(?:\s+(?:tier|grade|score|rank|rating|position|spot|place))?|top[\s_\-]tier|"
    r"(?:grade|tier|score|level)\s*[:=]?\s*(?:3|1\.0|10|a)\b|first|#\s?1|number\s+one|"
    r"supported|correct|verified|a\s+(?:perfect|full|maximum)\s+(?:score|grade|mark))"
)
_GRADE_VERB = (
    r"(?:grade|rate|rank|score|label|classify|mark|tag|categori[sz]e|assign|give|award|"
    r"treat|consider|place|put|list|position|move|judge|evaluate|assess|return|output|select|"
    r"choose|prefer|promote|boost|prioriti[sz]e)"
)

_CI = re.IGNORECASE


def _rx(pattern: str, flags: int = _CI) -> re.Pattern[str]:
    return re.compile(pattern, flags)


ADDRESS_RULES: tuple[Rule, ...] = (
    (
        "note_to_grader",
        _rx(
            r"\b(?:note|message|instructions?|attention|memo|reminder|notice|directive|request|"
            r"hint|guidance|advice|p\.?s\.?)\s*(?:to|for)?\s*(?:the|all|any|every|our|my|dear)?\s*"
            + _ROLE
            + r"\b"
        ),
    ),
    (
        "dear_grader",
        _rx(
            r"\b(?:dear|hello|hi|hey|attention|attn|calling|to)" + _W + r"(?:the" + _W + r")?"
            r"(?:" + _ROLE + r"|ai|llm|assistant|language" + _W + r"model|model)\b\s*[,:!-]"
        ),
    ),
    (
        "role_must_grade",
        _rx(
            r"\b"
            + _ROLE
            + r"\s*(?:,|:)?\s*(?:should|must|shall|will|needs?\s+to|has\s+to|have\s+to|"
            r"is\s+(?:required|instructed|asked|expected|supposed)\s+to|are\s+(?:required|"
            r"instructed|asked|expected|supposed)\s+to|please|can|may|ought\s+to|is\s+to|are\s+to)?"
            r"\s*(?:now\s+|always\s+|simply\s+)?" + _GRADE_VERB + r"\b"
        ),
    ),
    (
        "soft_role_grade_this",
        _rx(
            r"\b" + _SOFT_ROLE + r"\s*(?:,|:)?\s*(?:should|must|shall|will|needs?\s+to|has\s+to|"
            r"is\s+(?:required|instructed|asked)\s+to|please|ought\s+to)\s*(?:now\s+|always\s+)?"
            + _GRADE_VERB
            + r"\s+(?:"
            + _THIS
            + r"|it|me)\b"
        ),
    ),
    (
        "ignore_instructions",
        _rx(
            r"\b(?:ignore|disregard|forget|override|overrule|skip|bypass|discard|set\s+aside)"
            r"(?:\s+(?:all|any|every|the|your|its|these|those|previous|prior|above|earlier|"
            r"preceding|original|other|existing|given|standard|usual|system|grading|old|of))*\s+"
            r"(?:instructions?|rules?|guidelines?|directions?|prompts?|criteria|rubrics?|"
            r"grading|scoring|tiers?|definitions?|policy|policies|constraints?|orders?)\b"
        ),
    ),
    (
        "new_rule",
        _rx(
            r"\b(?:new|updated|revised|additional|special|override|overriding|supplementary|"
            r"important|mandatory)\s+(?:grading|evaluation|ranking|scoring|relevance|audit|"
            r"classification|labell?ing|judging)\s+(?:rule|instruction|criteri(?:on|a)|policy|"
            r"protocol|guideline|directive|requirement)s?\b"
        ),
    ),
    (
        "grade_this_as",
        _rx(
            r"\b" + _GRADE_VERB + r"\s+(?:" + _THIS + r"|it|me|us|this|this\s+one)\b"
            r"(?:\s+\w+){0,4}?\s*(?:as|at|with|in|into|to|a|an|the)?\s*[\"'“]?" + _GOOD
        ),
    ),
    (
        "this_should_be_graded",
        _rx(
            r"\b(?:" + _THIS + r"|this)\s+(?:should|must|shall|needs\s+to|has\s+to|is\s+to|"
            r"deserves\s+to|ought\s+to)\s+(?:always\s+)?(?:be\s+)?(?:graded|rated|ranked|scored|"
            r"classified|labell?ed|marked|treated|considered|placed|listed|judged|tiered|put|"
            r"promoted|given|assigned|kept|included|selected|shown|appear|come)\b"
        ),
    ),
    (
        "this_is_the_answer",
        _rx(
            r"\b(?:" + _THIS + r")\s+(?:is|was|has\s+been)\s+(?:the\s+|a\s+)?(?:" + _TIERS + r"|"
            r"(?:highly|most|perfectly|directly|fully|maximally|100%|extremely)" + _W + r"relevant|"
            r"(?:the\s+)?(?:best|most\s+relevant|correct|definitive|perfect|authoritative|official|"
            r"top|only\s+relevant)\s+(?:answer|match|result|source|passage|evidence|response))\b"
        ),
    ),
    (
        "answers_the_query",
        _rx(
            r"\b(?:"
            + _THIS
            + r"|it)\s+(?:fully\s+|directly\s+|perfectly\s+|completely\s+|exactly\s+)?"
            r"(?:answers|addresses|matches|satisfies|resolves|is\s+(?:highly\s+|fully\s+|"
            r"directly\s+)?relevant\s+to)\s+(?:the|your|this|every|any|each)\s+(?:user'?s?\s+)?"
            r"(?:query|question|search|request|information\s+need|prompt|claim|input)s?\b"
        ),
    ),
    (
        "rank_first",
        _rx(
            r"\b(?:(?:rank|list|sort|order|position)\s+(?:" + _THIS + r"|it|me|this|this\s+one)|"
            r"(?:place|put|move|show|return|keep|display|slot)\s+(?:" + _THIS + r"|me|this\s+one))"
            r"\s+(?:as\s+)?(?:first|#\s?1|number\s+one|on\s+top|at\s+the\s+(?:top|head|front)|"
            r"highest|above|ahead|before|top|in\s+first|in\s+the\s+top|in\s+(?:the\s+)?"
            r"(?:first|top|leading)\s+(?:position|place|spot|slot))"
        ),
    ),
    (
        "above_all_others",
        _rx(
            r"\b(?:above|ahead\s+of|before|over|higher\s+than|outrank\w*)\s+(?:all|every|any|each)?"
            r"\s*(?:the\s+)?(?:other|remaining|competing|rival)\s+(?:passages?|documents?|results?|"
            r"candidates?|snippets?|sources?|entries|chunks?)\b"
        ),
    ),
    (
        "claims_verified",
        _rx(
            r"\b(?:auditor|fact-?checker|verifier|reviewer|grader|evaluator|editor|moderator|"
            r"checker|validator|assessor)s?\s+(?:has|have|had)?\s*(?:already\s+|personally\s+|"
            r"independently\s+|fully\s+|carefully\s+)?(?:verified|confirmed|checked|validated|"
            r"approved|certified|vetted|cleared)\b"
        ),
    ),
    (
        "every_claim_supported",
        _rx(
            r"\b(?:all|every|each|any)\s+(?:of\s+the\s+|single\s+)?(?:claims?|statements?|"
            r"sentences?|facts?|assertions?)\s+(?:\w+\s+){0,5}?(?:is|are|has\s+been|have\s+been|"
            r"was|were|should\s+be|must\s+be|counts?\s+as)\s+(?:now\s+|already\s+|therefore\s+)?"
            r"(?:fully\s+|entirely\s+|completely\s+|independently\s+)?(?:supported|verified|"
            r"confirmed|substantiated|grounded|backed|accurate|correct|true|validated|"
            r"fully_supported)\b"
        ),
    ),
    (
        "the_answer_is_supported",
        _rx(
            r"\b(?:the|this|that|your)\s+(?:answer|response|reply|output|summary|generated\s+"
            r"(?:answer|text))\s+(?:above|below|given|provided)?\s*(?:is|has\s+been|was)\s+"
            r"(?:fully|entirely|completely|already|independently|100%)\s+(?:supported|verified|"
            r"grounded|correct|accurate|substantiated|confirmed)\b"
        ),
    ),
    (
        "correct_label_is",
        _rx(
            r"\b(?:correct|right|true|final|expected|gold|official|assigned|proper|actual|"
            r"intended|only\s+valid)\s+(?:label|class|category|classification|tier|"
            r"answer\s+label)(?:\s+(?:for|of)\s+(?:this|the|that|each|every)\s+\w+)?\s*"
            r"(?:is|:|=|should\s+be|must\s+be|here\s+is)"
        ),
    ),
    (
        "label_this_as",
        _rx(
            r"\b(?:label|classify|categori[sz]e|tag|class|file)\s+(?:" + _THIS + r"|it|this|the\s+"
            r"(?:input|claim|query|request|ticket|message))\s+(?:as|with|under|in|into)\b"
        ),
    ),
    (
        "in_your_reply",
        _rx(
            r"\b(?:in|into|to|within|at\s+the\s+(?:start|end)\s+of)\s+your\s+(?:reply|response|"
            r"output|justification|explanation|answer|json|verdict|grading|assessment|evaluation)\b"
            r"|\byour\s+(?:reply|response|output|justification|verdict|json)\s+(?:must|should|"
            r"shall|will|needs\s+to)\b"
            r"|\b(?:begin|start|end|prefix|open|close|finish)\s+your\s+(?:reply|response|output|"
            r"answer|justification)\b"
        ),
    ),
)

_STRONG_KEYS = (
    r"passage_id|passage_ids|tier|tiers|classifications?|tier_summary|key_evidence_snippet|"
    r"justification|relevance_score|relevance_grade|relevance_label|ranked_passages|ranking|"
    r"supporting_quotes|supporting_context_ids|claim_id|claims|support_level|unclassifiable|"
    r"unclassifiable_reason|verdict|winner|is_relevant|relevant|evaluation|grading|"
    r"contradicting_quote|unsupported_part|quoted_text|audit_result|decision"
)
_GENERIC_KEYS = r"score|grade|label|rank|rating|pass|result|relevance|status|answer"
_GOOD_VALUE = (
    r"(?:[\"']\s*(?:" + _TIERS + r"|relevant|highly[\s_\-]relevant|perfectly[\s_\-]relevant|"
    r"supported|support|pass|passed|yes|first|top|publish|approved|correct|accept)\s*[\"']|"
    r"true\b)"
)
REPLY_RULES: tuple[Rule, ...] = (
    ("reply_key", _rx(r"[\"'“]\s*(?:" + _STRONG_KEYS + r")\s*[\"'”]\s*:")),
    ("graded_key", _rx(r"[\"'“]\s*(?:" + _GENERIC_KEYS + r")\s*[\"'”]\s*:\s*" + _GOOD_VALUE)),
    (
        "verdict_line",
        _rx(
            r"(?:^|\n|[.!?]\s|[\[#*=\-|]{1,}\s*)\s*(?P<s>(?:final\s+|official\s+|overall\s+)?(?:verdict|"
            r"tier|relevance(?:\s+(?:grade|score|label|tier))?|winner|grading\s+result|"
            r"evaluation\s+result|audit\s+result|classification|assigned\s+tier)\s*[:=]\s*"
            r"(?:[\"'])?(?:" + _TIERS + r"|relevant|highly\s+relevant|perfectly\s+relevant|pass|"
            r"supported|support|[0-9](?:\.[0-9]+)?(?:\s*/\s*[0-9]+)?\b|[ab]\b))"
        ),
    ),
    (
        "evaluation_complete",
        _rx(
            r"(?:evaluation|grading|assessment|judge?ment|audit|ranking|classification|review)\s+"
            r"(?:is\s+)?(?:complete|completed|finished|done|concluded|over)\b\s*[\-=.:!\]]"
        ),
    ),
    (
        "evaluator_output",
        _rx(
            r"\b(?:evaluator|grader|judge|assistant|model|system|auditor|ranker|assessor|ai)\s*(?:'s\s+)?"
            r"(?:output|response|reply|verdict|decision|answer|json)\s*[:=]"
        ),
    ),
)

ROLE_RULES: tuple[Rule, ...] = (
    ("special_token", _rx(r"<\|[A-Za-z_][A-Za-z0-9_ .\-]{1,40}\|>")),
    (
        "llama_inst",
        _rx(
            r"\[/?INST\]|<</?SYS>>|</?s>\s*\[INST\]|\[/?SYSTEM_PROMPT\]|"
            r"\[/?(?:AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS)\]"
        ),
    ),
    ("gemma_turn", _rx(r"<(?:start|end)_of_turn>")),
    (
        "role_tag",
        _rx(
            r"</?\s*(?:system|user|assistant|developer|instructions?|admin|administrator|grader|"
            r"evaluator|judge|auditor|system[_\-]prompt|sys|human|im_start|im_end|tool)\s*>"
        ),
    ),
    (
        "data_closer",
        _rx(
            r"</\s*(?:passages?|documents?|docs?|context|contexts|untrusted[_\-]?\w*|"
            r"search[_\-]?results?|retrieved[_\-]?\w*|evidence|data[_\-]?block|data|content|"
            r"candidate|candidates|input|inputs|query|response[_\-]?[ab]?|answer|claims?|"
            r"excerpt|chunk|snippet|quote|user[_\-]?data)\s*>"
        ),
    ),
    (
        "bracket_role",
        _rx(
            r"\[\s*/?\s*(?:system|sys|admin|administrator|developer|evaluator|grader|judge|"
            r"auditor|operator|grading[\s_]protocol|evaluation[\s_]protocol|submission[\s_]metadata|"
            r"instructions?|system[\s_]message|system[\s_]note|override|ranker|assistant)\s*\]"
        ),
    ),
    (
        "line_role",
        re.compile(
            r"(?:^|\n)\s*(?P<s>#{2,}\s*(?:system|instruction|instructions|response|assistant|"
            r"human|user|input)\b|(?:SYSTEM|System|ASSISTANT|Assistant|DEVELOPER|Developer)\s*:)"
        ),
    ),
    (
        "end_of_block",
        _rx(
            r"(?:[\[\-=#*<]{1,}\s*)(?:end|close|closing|stop)\s*(?:of\s+)?(?:the\s+)?(?:passages?|"
            r"documents?|data|context|input|untrusted\s+(?:data|content|text)|retrieved\s+"
            r"(?:text|content|data)|search\s+results?|response|candidate|evidence|source)\b"
        ),
    ),
)

HIDDEN = re.compile(
    # Unicode tag characters (ASCII smuggling), the bidi overrides of "Trojan source" text, and
    # runs of zero-width characters; not the direction marks or byte-order marks of scraped text
    "[\U000e0000-\U000e007f]+|[\u202d\u202e]|[\u200b\u200c\u200d\u2060-\u2064]{3,}"
)
