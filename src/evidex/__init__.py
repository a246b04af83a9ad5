"""evidex: grade retrieved evidence in RAG pipelines.

Four jobs, each a library call, a CLI command and an HTTP endpoint: ``tier`` (relevance tiers
and context selection), ``rerank``, ``classify`` and ``audit``; one harness around them
(validation, re-asks, explicit fallbacks, review queue, audit log, cache).
"""

from evidex._version import __version__
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


_LAZY = {"SqlStore": "evidex.store", "open_store": "evidex.store"}
"""Names loaded on first use: the store brings SQLAlchemy (a third of ``import evidex``), which
a job call given ``store="sqlite://"`` or a URL opens only when it runs, and ``evidex
--version`` never needs."""


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evidex' has no attribute {name!r}")
