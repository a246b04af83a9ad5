"""What more than one job's review payload does alike with a review form.

Kept apart from :mod:`evidex.jobs._review` (the payload base) so that a rule the forms share
is written once and each job's payload states only its own words.
"""

from __future__ import annotations

from dataclasses import dataclass

from evidex.errors import InputError
from evidex.jobs._review import missing_choice

__all__ = ["FormVerdict"]


@dataclass(frozen=True)
class FormVerdict:
    """How a payload's form turns into a verdict: ``own`` is the verdict of a form that holds
    the reviewer's own answer (labels ticked, ranks typed) with the verdict left empty;
    ``choose`` is what a form without any choice must choose, and how (see
    :func:`missing_choice`); ``nothing_to_accept`` says why ``accept`` is refused on an item
    that holds nothing of the judge's to confirm."""

    own: str
    choose: tuple[str, str]
    nothing_to_accept: str

    def resolve(self, verdict: str, *, entered: bool, can_accept: bool) -> str:
        """The verdict a submitted form stands for; :class:`InputError` when it stands for
        none (no choice), or accepts what is no judgment (a fallback's value)."""
        if not verdict and entered:
            verdict = self.own
        if not verdict:
            raise missing_choice(*self.choose)
        if verdict == "accept" and not can_accept:
            raise InputError(self.nothing_to_accept)
        return verdict
