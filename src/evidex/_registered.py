"""The registered jobs, one entry each: the module that defines the job, its default judge, its
one-line summary, and the options a judge gets for the job when it is built from a spec string.

It is a root module, with no imports of its own, so that the settings (which name a judge and
a prompt per job) and the jobs' registry read the same table without importing any job. A
new job registers here with one line; everything else is read from its definition
(:mod:`evidex.jobs.registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = ["JOBS", "SCORED_ON_QWEN", "Registered"]


class Registered(NamedTuple):
    module: str
    """The module whose ``DEFINITION`` is the job's :class:`~evidex.jobs.JobDefinition`."""
    default_judge: str
    """The judge spec a call without ``judge=`` (and no configured judge) runs."""
    summary: str
    """What the job does, in one line: its definition's ``summary``, the help of ``evidex JOB``
    and its line in ``evidex --help``, which lists the jobs without importing them."""
    judge_options: Mapping[str, Mapping[str, Any]] = MappingProxyType({})
    """Judge spec → the options a judge of that spec gets when it is built for this job from
    the spec string (the default judge, a configured one, ``judge="local:qwen"``, ``--judge``,
    a request's ``judge``); options the caller gives win (``--judge-option mode=generate``). A
    judge instance the caller built is used as it was built."""


SCORED_ON_QWEN: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {"local:qwen": MappingProxyType({"mode": "score"})}
)
"""``local:qwen`` in score mode: the mode that measures best with the shipped 1.5B model for
the jobs that judge claims and sufficiency (docs/benchmarks.md). Audit on WiCE: 0 fallbacks and
supported-vs-rest F1 0.61 on 224 held-out claims (``audit_wice``), where ``mode=generate`` fell
back on 8 of 12; classify on SciFact: accuracy 70 % and 0 fallbacks on 30 claims against 45 %
and 5 fallbacks of 20 (``classify_scifact_score``, ``classify_scifact``); sufficiency: measured
in score mode only (F1 of "insufficient" 0.71 and 0.79, ``sufficiency_clapnq``). Tier and
rerank keep the judge's own default, ``generate``: score mode's tiers did not agree with NIST
(kappa -0.02 against 0.17, ``qwen_modes_agreement``) and its pointwise order put relevant
above irrelevant passages no better than chance (0.50, ``qwen_modes_rerank``)."""

JOBS: dict[str, Registered] = {
    "tier": Registered(
        "evidex.jobs.tier",
        "local:minilm",
        "Grade passages into relevance tiers, with a justification and a verbatim snippet.",
    ),
    "rerank": Registered(
        "evidex.jobs.rerank",
        "local:minilm",
        "Rerank candidate passages by relevance, with a justification per position.",
    ),
    "classify": Registered(
        "evidex.jobs.classify",
        "local:qwen",
        "Assign labels from a taxonomy to a text, each backed by quotes from the passages.",
        SCORED_ON_QWEN,
    ),
    "audit": Registered(
        "evidex.jobs.audit",
        "local:qwen",
        "Split a generated answer into verbatim claims and grade each against the passages.",
        SCORED_ON_QWEN,
    ),
    "sufficiency": Registered(
        "evidex.jobs.sufficiency",
        "local:qwen",
        "Check whether the passages suffice to answer the query, before generating: answer, "
        "abstain or escalate.",
        SCORED_ON_QWEN,
    ),
}
