"""What a model call cost, from the usage the provider reported and a configured price table.

Prices are per endpoint (the table's key is the endpoint name), with an optional
override for one model (`"endpoint/model"`), in US dollars per million tokens, on
the three bases providers bill: input, cached input and output.

Where the obvious sum is wrong:

- Cached tokens are billed apart, and providers disagree on where they are reported:
  OpenAI-style `prompt_tokens` *include* the cached ones (`prompt_tokens_details.
  cached_tokens` is a part of them), Anthropic-style input tokens *exclude* cache reads.
  `Price.cached_in_input` says which basis the endpoint reports on, so a cached token
  is neither billed twice nor left out.
- A call the provider sent no usage for cannot be priced: it is counted as unpriced,
  never priced at an estimate or at zero ("could not measure" is an omission, not a
  sentinel), so a displayed cost says how many calls it leaves out.
- Prices must be finite and not negative; a NaN would poison every later sum.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from steadyloop.completion import Usage

PER_TOKENS = 1_000_000


class Price(BaseModel):
    """USD per million tokens for one endpoint (or one model of it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    # None: cached input is billed at the input price.
    cached_input: float | None = Field(default=None, ge=0)
    # True when the endpoint's prompt_tokens already include the cached tokens (OpenAI).
    cached_in_input: bool = True


PriceTable = dict[str, Price]


def price_for(table: PriceTable, endpoint: str, model: str | None = None) -> Price | None:
    """The price of `model` on `endpoint`: its own entry first, then the endpoint's."""
    if model is not None and f"{endpoint}/{model}" in table:
        return table[f"{endpoint}/{model}"]
    return table.get(endpoint)


def cost_of(usage: Usage, price: Price) -> float:
    """US dollars for one call's reported usage."""
    cached = usage.cached_tokens or 0
    uncached = usage.prompt_tokens - cached if price.cached_in_input else usage.prompt_tokens
    cached_rate = price.input if price.cached_input is None else price.cached_input
    return (
        max(uncached, 0) * price.input
        + cached * cached_rate
        + usage.completion_tokens * price.output
    ) / PER_TOKENS
