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
from evidex.harness.runner import HarnessSettings
from evidex.jobs.select import SelectedContext, select_context
from evidex.jobs.tier import TierResult, atier, tier
from evidex.judges import get_judge
from evidex.judging import Judge, JudgeReply, JudgeRequest, Message
from evidex.store import SqlStore, open_store
from evidex.tasks.tier import TierAssignment, TierExample, load_examples
from evidex.types import DEFAULT_TIERS, Event, Passage, RiskLevel, TierDefinition, TierScheme, Usage

__all__ = [
    "DEFAULT_TIERS",
    "CircuitOpenError",
    "ConfigError",
    "Event",
    "EvidexError",
    "HarnessSettings",
    "InputError",
    "Judge",
    "JudgeError",
    "JudgeOutputInvalid",
    "JudgeReply",
    "JudgeRequest",
    "JudgeUnavailable",
    "Message",
    "MissingExtraError",
    "Passage",
    "RiskLevel",
    "RunError",
    "SelectedContext",
    "SqlStore",
    "StoreError",
    "TierAssignment",
    "TierDefinition",
    "TierExample",
    "TierResult",
    "TierScheme",
    "UnknownJudgeError",
    "Usage",
    "UsageError",
    "__version__",
    "atier",
    "get_judge",
    "load_examples",
    "open_store",
    "select_context",
    "tier",
]
