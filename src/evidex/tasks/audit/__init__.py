"""The audit task: split a generated answer into verbatim claims and grade each claim's support
in the retrieved context (``fully_supported``, ``partially_supported``, ``inferred``,
``unsupported``), with cited passage ids, verbatim quotes and contradictions.

Every claim is found in place in the answer (its offsets are returned), every quote in the
passage it cites, and the summary is recomputed from the claims: the judge's own counts are
never trusted. Orchestration (segments, batches, merge, decision) is in :mod:`evidex.jobs.audit`.

What lives where:

- :mod:`.prompts`: the three prompt templates (one pass, extract, classify);
- :mod:`.models`: graded claims, the summary, claim spans, the validated replies and batches;
- :mod:`.steps`: :class:`AuditStep` (one pass), :class:`ExtractStep` then
  :class:`ClassifyStep` (two passes);
- :mod:`.checks`: the semantic and lexical checks of a reply against its input.
"""

from evidex.tasks.audit.models import (
    SUPPORT_LEVELS,
    AuditSummary,
    ClaimAudit,
    ClaimBatch,
    ClaimSpan,
    ClaimsValue,
    ExtractedValue,
    SegmentBatch,
    SourceRef,
    SupportLevel,
)
from evidex.tasks.audit.prompts import CLASSIFY_TEMPLATE, EXTRACT_TEMPLATE, ONE_PASS_TEMPLATE
from evidex.tasks.audit.steps import AuditStep, ClassifyStep, ExtractStep

__all__ = [
    "CLASSIFY_TEMPLATE",
    "EXTRACT_TEMPLATE",
    "ONE_PASS_TEMPLATE",
    "SUPPORT_LEVELS",
    "AuditStep",
    "AuditSummary",
    "ClaimAudit",
    "ClaimBatch",
    "ClaimSpan",
    "ClaimsValue",
    "ClassifyStep",
    "ExtractStep",
    "ExtractedValue",
    "SegmentBatch",
    "SourceRef",
    "SupportLevel",
]
