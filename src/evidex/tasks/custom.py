"""Your own wording for a step's prompt, checked against the placeholders the step fills.

The spec's prompts are templates meant to be adapted; a :class:`Prompt` is that adaptation
(a user message, optionally a system message), and :func:`custom_template` turns it into the
step's :class:`~evidex.tasks.base.PromptTemplate`. Its version is the hash of the new text, so
the cache key, the audit log's prompt version and calibration staleness follow the wording.

A placeholder the step does not fill would reach the judge as literal ``[NAME]``, and a prompt
without the query or the passages would grade nothing: both are a :class:`ConfigError` that
names the prompt's origin, the placeholder and the ones allowed. Pure: reading the file is
:func:`evidex.loaders.load_prompt`.
"""

from __future__ import annotations

from dataclasses import dataclass

from evidex.errors import ConfigError
from evidex.tasks.base import PromptTemplate

__all__ = ["BUILTIN_PROMPT", "REQUIRED_PLACEHOLDERS", "Prompt", "custom_template"]

REQUIRED_PLACEHOLDERS: dict[str, frozenset[str]] = {
    "tier": frozenset({"QUERY", "PASSAGES"}),
    "rerank": frozenset({"QUERY", "PASSAGES"}),
    "rerank.score": frozenset({"QUERY", "PASSAGES"}),
    "rerank.pair": frozenset({"QUERY", "PASSAGE_A", "PASSAGE_B"}),
    "classify": frozenset({"INPUT", "CONTEXT", "LABELS"}),
    "audit": frozenset({"ANSWER", "CONTEXT"}),
    "audit.classify": frozenset({"CLAIMS", "CONTEXT"}),
}
"""What a prompt must show the judge, by step name: the rest of a step's placeholders (its
built-in template's) are optional."""


@dataclass(frozen=True)
class Prompt:
    """A user's prompt text: ``user`` is sent as the user message, ``system`` (may be empty)
    as the system message. ``origin`` names where it came from (a file path) in errors."""

    user: str
    system: str = ""
    origin: str = "<prompt>"


BUILTIN_PROMPT = Prompt(user="", origin="<built-in>")
"""``prompt=BUILTIN_PROMPT``: the job's built-in prompt, whatever the ``prompts`` setting says
(the service passes it for a job it has no prompt for, so a request never reads the settings)."""


def custom_template(builtin: PromptTemplate, prompt: Prompt, step: str) -> PromptTemplate:
    """``prompt`` as the template of ``step`` in place of ``builtin``; the re-ask and the
    stricter format reminder stay the built-in ones (the harness fills them)."""
    allowed = builtin.placeholders()
    required = REQUIRED_PLACEHOLDERS.get(step, frozenset()) & allowed
    template = PromptTemplate(
        name=f"{builtin.name}+custom",
        system=prompt.system,
        user=prompt.user,
        reask=builtin.reask,
        strict=builtin.strict,
    )
    found = template.placeholders()
    shown = ", ".join(f"[{p}]" for p in sorted(allowed))
    unknown = sorted(found - allowed)
    if unknown:
        raise ConfigError(
            f"{prompt.origin}: unknown placeholder {', '.join(f'[{p}]' for p in unknown)} for "
            f"the {step} prompt; the allowed placeholders are {shown}"
        )
    missing = sorted(required - found)
    if missing:
        raise ConfigError(
            f"{prompt.origin}: the {step} prompt lacks the required placeholder "
            f"{', '.join(f'[{p}]' for p in missing)} (required: "
            f"{', '.join(f'[{p}]' for p in sorted(required))}; allowed: {shown})"
        )
    return template
