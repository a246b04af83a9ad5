"""Moved to :mod:`evidex.tasks.spans`; kept until ``evidex.jobs.audit`` imports from there."""

from evidex.tasks.spans import Segment, find_span, segment_text

__all__ = ["Segment", "find_span", "segment_text"]
