"""evidex: grade retrieved evidence in RAG pipelines.

Four jobs, each a library call, a CLI command and an HTTP endpoint: ``tier`` (relevance tiers
and context selection), ``rerank``, ``classify`` and ``audit``; one harness around them
(validation, re-asks, explicit fallbacks, review queue, audit log, cache).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from evidex._version import __version__

if _TYPE_CHECKING:
    from evidex.errors import (
        CircuitOpenError,
        ConfigError,
        EvidexError,
        InputError,
        JudgeError,
        JudgeOutputInvalid,
        JudgeUnavailable,
        MissingExtraError,
        ReviewConflict,
        RunError,
        StoreError,
        UnknownJudgeError,
        UsageError,
    )
    from evidex.harness.events import Hooks
    from evidex.harness.metrics import metrics
    from evidex.harness.runner import HarnessSettings
    from evidex.jobs.audit import (
        AnswerInput,
        AuditDecision,
        AuditOptions,
        AuditPolicy,
        AuditResult,
        AuditSummary,
        ClaimAudit,
        aaudit,
        aaudit_many,
        audit,
        audit_many,
    )
    from evidex.jobs.classify import (
        ClassifyExample,
        ClassifyInput,
        ClassifyOptions,
        ClassifyResult,
        Evidence,
        LabelAssignment,
        RoutingDecision,
        aclassify,
        aclassify_many,
        classify,
        classify_many,
    )
    from evidex.jobs.consistency import ConsistencyReport, aconsistency_check, consistency_check
    from evidex.jobs.rerank import (
        Grounding,
        RankedPassage,
        RerankInput,
        RerankMetrics,
        RerankOptions,
        RerankResult,
        arerank,
        arerank_many,
        rerank,
        rerank_many,
    )
    from evidex.jobs.select import SelectedContext, select_context
    from evidex.jobs.tier import (
        TierAssignment,
        TierExample,
        TierInput,
        TierOptions,
        TierResult,
        atier,
        atier_many,
        tier,
        tier_many,
    )
    from evidex.judges import get_judge
    from evidex.judges.scoring import Scorer
    from evidex.judging import Judge, JudgeReply, JudgeRequest, Message
    from evidex.loaders import load_classify_examples, load_examples, load_prompt
    from evidex.pricing import Price
    from evidex.store import SqlStore, open_store
    from evidex.tasks.custom import Prompt
    from evidex.taxonomy import LabelDefinition, Taxonomy
    from evidex.types import (
        DEFAULT_TIERS,
        Event,
        Passage,
        PassageLike,
        RiskLevel,
        TierDefinition,
        TierScheme,
        Usage,
    )

__all__ = [
    "DEFAULT_TIERS",
    "AnswerInput",
    "AuditDecision",
    "AuditOptions",
    "AuditPolicy",
    "AuditResult",
    "AuditSummary",
    "CircuitOpenError",
    "ClaimAudit",
    "ClassifyExample",
    "ClassifyInput",
    "ClassifyOptions",
    "ClassifyResult",
    "ConfigError",
    "ConsistencyReport",
    "Event",
    "Evidence",
    "EvidexError",
    "Grounding",
    "HarnessSettings",
    "Hooks",
    "InputError",
    "Judge",
    "JudgeError",
    "JudgeOutputInvalid",
    "JudgeReply",
    "JudgeRequest",
    "JudgeUnavailable",
    "LabelAssignment",
    "LabelDefinition",
    "Message",
    "MissingExtraError",
    "Passage",
    "PassageLike",
    "Price",
    "Prompt",
    "RankedPassage",
    "RerankInput",
    "RerankMetrics",
    "RerankOptions",
    "RerankResult",
    "ReviewConflict",
    "RiskLevel",
    "RoutingDecision",
    "RunError",
    "Scorer",
    "SelectedContext",
    "SqlStore",
    "StoreError",
    "Taxonomy",
    "TierAssignment",
    "TierDefinition",
    "TierExample",
    "TierInput",
    "TierOptions",
    "TierResult",
    "TierScheme",
    "UnknownJudgeError",
    "Usage",
    "UsageError",
    "__version__",
    "aaudit",
    "aaudit_many",
    "aclassify",
    "aclassify_many",
    "aconsistency_check",
    "arerank",
    "arerank_many",
    "atier",
    "atier_many",
    "audit",
    "audit_many",
    "classify",
    "classify_many",
    "consistency_check",
    "get_judge",
    "load_classify_examples",
    "load_examples",
    "load_prompt",
    "metrics",
    "open_store",
    "rerank",
    "rerank_many",
    "select_context",
    "tier",
    "tier_many",
]


_HOMES = {
    "evidex.errors": (
        "CircuitOpenError ConfigError EvidexError InputError JudgeError JudgeOutputInvalid "
        "JudgeUnavailable MissingExtraError ReviewConflict RunError StoreError UnknownJudgeError "
        "UsageError"
    ),
    "evidex.harness.events": "Hooks",
    "evidex.harness.metrics": "metrics",
    "evidex.harness.runner": "HarnessSettings",
    "evidex.jobs.audit": (
        "AnswerInput AuditDecision AuditOptions AuditPolicy AuditResult AuditSummary ClaimAudit "
        "aaudit aaudit_many audit audit_many"
    ),
    "evidex.jobs.classify": (
        "ClassifyExample ClassifyInput ClassifyOptions ClassifyResult Evidence LabelAssignment "
        "RoutingDecision aclassify aclassify_many classify classify_many"
    ),
    "evidex.jobs.consistency": "ConsistencyReport aconsistency_check consistency_check",
    "evidex.jobs.rerank": (
        "Grounding RankedPassage RerankInput RerankMetrics RerankOptions RerankResult arerank "
        "arerank_many rerank rerank_many"
    ),
    "evidex.jobs.select": "SelectedContext select_context",
    "evidex.jobs.tier": (
        "TierAssignment TierExample TierInput TierOptions TierResult atier atier_many tier "
        "tier_many"
    ),
    "evidex.judges": "get_judge",
    "evidex.judges.scoring": "Scorer",
    "evidex.judging": "Judge JudgeReply JudgeRequest Message",
    "evidex.loaders": "load_classify_examples load_examples load_prompt",
    "evidex.pricing": "Price",
    "evidex.store": "SqlStore open_store",
    "evidex.tasks.custom": "Prompt",
    "evidex.taxonomy": "LabelDefinition Taxonomy",
    "evidex.types": (
        "DEFAULT_TIERS Event Passage PassageLike RiskLevel TierDefinition TierScheme Usage"
    ),
}
_LAZY = {name: module for module, names in _HOMES.items() for name in names.split()}
"""Where each public name lives; loaded on first use (PEP 562). ``import evidex`` then costs
the version string alone: each CLI call in a shell pipeline, and ``evidex --version``, pay for
none of the jobs' models, the store's SQLAlchemy or a judge's runtime until they use them."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evidex' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
