"""What a run cost: token usage priced by a table the user configures.

A price is per model, in the user's currency per one million tokens, input and output apart
(the way providers publish them). The table is keyed by the judge's spec string, exactly as
the judge names itself (``openai:gpt-4o-mini``): a judge the table does not name has no cost
(``None``), never a guessed one, because a wrong estimate is worse than an honest blank.

In the config file (see :mod:`evidex.config`)::

    [prices]
    "openai:gpt-4o-mini" = { input = 0.15, output = 0.60 }

or ``EVIDEX_PRICES`` as JSON, or in Python: ``HarnessSettings(prices={"openai:gpt-4o-mini":
Price(input=0.15, output=0.60)})`` passed as ``settings=``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from evidex.types import Usage

__all__ = ["Price", "estimate_cost"]

PER_TOKENS = 1_000_000
"""Prices are per this many tokens."""


class Price(BaseModel):
    """A model's price per one million tokens, input (prompt) and output (completion)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="per 1M input (prompt) tokens")
    output: float = Field(ge=0, description="per 1M output (completion) tokens")

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` at this price."""
        return (
            usage.prompt_tokens * self.input + usage.completion_tokens * self.output
        ) / PER_TOKENS


def estimate_cost(prices: Mapping[str, Price], judge_id: str, usage: Usage) -> float | None:
    """The cost of ``usage`` by ``judge_id`` at the table's price; ``None`` when the table
    does not name that judge (never a guessed price)."""
    price = prices.get(judge_id)
    return None if price is None else price.cost(usage)
