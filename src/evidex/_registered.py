"""The registered jobs, one line each: the module that defines the job and its default judge.

It is a root module, with no imports of its own, so that the settings (which name a judge and
a prompt per job) and the jobs' registry read the same table without importing any job. A
new job registers here with one line; everything else is read from its definition
(:mod:`evidex.jobs.registry`).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["JOBS", "Registered"]


class Registered(NamedTuple):
    module: str
    """The module whose ``DEFINITION`` is the job's :class:`~evidex.jobs.JobDefinition`."""
    default_judge: str
    """The judge spec a call without ``judge=`` (and no configured judge) runs."""


JOBS: dict[str, Registered] = {
    "tier": Registered("evidex.jobs.tier", "local:minilm"),
    "rerank": Registered("evidex.jobs.rerank", "local:minilm"),
    "classify": Registered("evidex.jobs.classify", "local:qwen"),
    "audit": Registered("evidex.jobs.audit", "local:qwen"),
    "sufficiency": Registered("evidex.jobs.sufficiency", "local:qwen"),
}
