"""What a model call cost, from the usage the provider reported and a configured price table.

Prices are per endpoint (the table's key is the endpoint name), with an optional
override for one model (`"endpoint/model"`), in US dollars per million tokens, on
the four bases providers bill: input, cached input (cache reads), cache writes and
output.

Where the obvious sum is wrong:

- Cached tokens are billed apart, and providers disagree on where they are reported:
  OpenAI-style `prompt_tokens` *include* the cached ones (`prompt_tokens_details.
  cached_tokens` is a part of them), Anthropic-style input tokens *exclude* cache reads.
  `Price.cached_in_input` says which basis the endpoint reports on, so a cached token
  is neither billed twice nor left out. steadyloop's Anthropic wire already adds the
  cache reads and writes into `prompt_tokens` (as OpenAI counts), so its endpoints
  keep the default `True`: `False` there would bill each cache read twice.
- Cache writes are billed above the input price (Anthropic: 1.25x for five minutes, 2x
  for an hour) and are a part of the input tokens (`Usage.cache_creation_tokens`, read
  on the Anthropic wire). With `Price.cache_write_input` set they are billed at it, and
  not again at the input price; without it the sum is the one before that price
  existed, to the cent, so a run recorded then sums the same.
- A call the provider sent no usage for cannot be priced: it is counted as unpriced,
  never priced at an estimate or at zero ("could not measure" is an omission, not a
  sentinel), so a displayed cost says how many calls it leaves out.
- Prices must be finite and not negative; a NaN would poison every later sum. Nor
  absurd: a price is at most `MAX_PRICE` (a dollar a token), and `cost_of` reads each
  token count as at most `MAX_TOKENS` (a provider can report `1e300` or a 5,000-digit
  integer), so a cost is always a finite float: it is summed in workflow code, where an
  `OverflowError` would fail the workflow task forever and an infinity would not
  survive JSON.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from steadyloop._stream.completion import Usage

PER_TOKENS = 1_000_000
# USD per million tokens: a dollar a token. Beyond it a price is a typo, not a tariff.
MAX_PRICE: Final = 1_000_000.0
# Tokens one call can be billed for; a reported count beyond it is read as this.
MAX_TOKENS: Final = 10**12


class Price(BaseModel):
    """USD per million tokens for one endpoint (or one model of it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    input: float = Field(ge=0, le=MAX_PRICE)
    output: float = Field(ge=0, le=MAX_PRICE)
    # None: cached input is billed at the input price.
    cached_input: float | None = Field(default=None, ge=0, le=MAX_PRICE)
    # True when the endpoint's prompt_tokens already include the cached tokens (OpenAI).
    cached_in_input: bool = True
    # None: tokens written to the prompt cache are billed at the input price.
    cache_write_input: float | None = Field(default=None, ge=0, le=MAX_PRICE)


PriceTable = dict[str, Price]


def price_for(table: PriceTable, endpoint: str, model: str | None = None) -> Price | None:
    """The price of `model` on `endpoint`: its own entry first, then the endpoint's."""
    if model is not None and f"{endpoint}/{model}" in table:
        return table[f"{endpoint}/{model}"]
    return table.get(endpoint)


def cost_of(usage: Usage, price: Price) -> float:
    """US dollars for one call's reported usage: finite whatever the counts say."""
    prompt = _tokens(usage.prompt_tokens)
    cached = _tokens(usage.cached_tokens)
    uncached = prompt - cached if price.cached_in_input else prompt
    cached_rate = price.input if price.cached_input is None else price.cached_input
    written = 0.0
    if price.cache_write_input is not None:
        creation = min(_tokens(usage.cache_creation_tokens), max(uncached, 0))
        uncached -= creation
        written = creation * price.cache_write_input
    return (
        max(uncached, 0) * price.input
        + cached * cached_rate
        + written
        + _tokens(usage.completion_tokens) * price.output
    ) / PER_TOKENS


def _tokens(count: int | None) -> int:
    """A reported count, within [0, MAX_TOKENS] (None and negatives are 0)."""
    return 0 if count is None or count < 0 else min(count, MAX_TOKENS)
