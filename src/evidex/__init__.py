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
    RunError,
    StoreError,
    UnknownJudgeError,
    UsageError,
)
from evidex.harness.metrics import metrics
from evidex.harness.runner import HarnessSettings
from evidex.jobs._audit_policy import AuditDecision, AuditPolicy
from evidex.jobs.audit import AnswerInput, AuditResult, aaudit, aaudit_many, audit, audit_many
from evidex.jobs.classify import (
    ClassifyInput,
    ClassifyResult,
    RoutingDecision,
    aclassify,
    aclassify_many,
    classify,
    classify_many,
)
from evidex.jobs.consistency import ConsistencyReport, aconsistency_check, consistency_check
from evidex.jobs.rerank import RerankMetrics, RerankResult, arerank, rerank
from evidex.jobs.select import SelectedContext, select_context
from evidex.jobs.tier import TierResult, atier, tier
from evidex.judges import get_judge
from evidex.judges.scoring import Scorer
from evidex.judging import Judge, JudgeReply, JudgeRequest, Message
from evidex.loaders import load_classify_examples, load_examples
from evidex.store import SqlStore, open_store
from evidex.tasks.audit import AuditSummary, ClaimAudit
from evidex.tasks.classify import ClassifyExample, Evidence, LabelAssignment
from evidex.tasks.rerank import RankedPassage
from evidex.tasks.tier import TierAssignment, TierExample
from evidex.taxonomy import LabelDefinition, Taxonomy
from evidex.types import DEFAULT_TIERS, Event, Passage, RiskLevel, TierDefinition, TierScheme, Usage

__all__ = [
    "DEFAULT_TIERS",
    "AnswerInput",
    "AuditDecision",
    "AuditPolicy",
    "AuditResult",
    "AuditSummary",
    "CircuitOpenError",
    "ClaimAudit",
    "ClassifyExample",
    "ClassifyInput",
    "ClassifyResult",
    "ConfigError",
    "ConsistencyReport",
    "Event",
    "Evidence",
    "EvidexError",
    "HarnessSettings",
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
    "RankedPassage",
    "RerankMetrics",
    "RerankResult",
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
    "atier",
    "audit",
    "audit_many",
    "classify",
    "classify_many",
    "consistency_check",
    "get_judge",
    "load_classify_examples",
    "load_examples",
    "metrics",
    "open_store",
    "rerank",
    "select_context",
    "tier",
]
