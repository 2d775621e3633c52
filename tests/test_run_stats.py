"""Stats: cost by a price table on each billing basis, retries by reason, folding, and
stats that lack these fields still loading."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from steadyloop._history.compaction import CompactionRecord
from steadyloop._history.healing import Healing
from steadyloop._routing.pricing import Price, cost_of, price_for
from steadyloop._run.models import CarriedState, RunInput, RunStats
from steadyloop._stream.completion import Usage

GPT = Price(input=2.0, cached_input=0.5, output=8.0)


def test_cached_tokens_inside_prompt_tokens_are_billed_once_at_the_cached_price() -> None:
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=500_000, cached_tokens=400_000)
    # 600k uncached at $2, 400k cached at $0.5, 500k out at $8.
    assert cost_of(usage, GPT) == pytest.approx(1.2 + 0.2 + 4.0)


def test_cached_tokens_reported_apart_from_input_are_added_not_subtracted() -> None:
    apart = GPT.model_copy(update={"cached_in_input": False})
    usage = Usage(prompt_tokens=600_000, completion_tokens=0, cached_tokens=400_000)
    assert cost_of(usage, apart) == pytest.approx(1.2 + 0.2)


def test_cached_input_without_its_own_price_is_billed_as_input() -> None:
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=0, cached_tokens=1_000_000)
    assert cost_of(usage, Price(input=3.0, output=15.0)) == pytest.approx(3.0)


CLAUDE = Price(input=3.0, cached_input=0.3, cache_write_input=3.75, output=15.0)


def test_cache_writes_are_billed_at_their_own_price_and_not_again_as_input() -> None:
    # As the Anthropic wire reads it: prompt_tokens = 200k plain + 300k written + 500k read.
    usage = Usage(
        prompt_tokens=1_000_000,
        completion_tokens=100_000,
        cached_tokens=500_000,
        cache_creation_tokens=300_000,
    )
    # 200k at $3, 300k written at $3.75, 500k read at $0.3, 100k out at $15.
    assert cost_of(usage, CLAUDE) == pytest.approx(0.6 + 1.125 + 0.15 + 1.5)
    # Without a write price, the sum is the one before the field existed: writes as input.
    plain = CLAUDE.model_copy(update={"cache_write_input": None})
    assert cost_of(usage, plain) == pytest.approx(0.5 * 3.0 + 0.15 + 1.5)


def test_more_cache_writes_than_input_are_billed_as_the_input_there_is() -> None:
    usage = Usage(prompt_tokens=1_000, completion_tokens=0, cache_creation_tokens=10**15)
    assert cost_of(usage, CLAUDE) == pytest.approx(1_000 * 3.75 / 1_000_000)


def test_a_models_own_price_wins_over_its_endpoints() -> None:
    cheap = Price(input=0.1, output=0.4)
    table = {"openai": GPT, "openai/gpt-mini": cheap}
    assert price_for(table, "openai", "gpt-mini") is cheap
    assert price_for(table, "openai", "gpt-big") is GPT
    assert price_for(table, "local", "m") is None


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_a_price_that_would_poison_every_sum_is_refused(bad: float) -> None:
    with pytest.raises(ValidationError):
        Price(input=bad, output=1.0)


def test_a_call_without_usage_or_without_a_price_is_counted_unpriced_not_priced_at_zero() -> None:
    stats = RunStats()
    stats.count_cost(Usage(prompt_tokens=1000, completion_tokens=100, cached_tokens=10), GPT)
    stats.count_cost(None, GPT)
    stats.count_cost(Usage(prompt_tokens=5, completion_tokens=5), None)
    assert stats.priced_calls == 1 and stats.unpriced_calls == 2
    assert stats.cost_usd == pytest.approx(
        cost_of(Usage(prompt_tokens=1000, completion_tokens=100, cached_tokens=10), GPT)
    )
    assert stats.cached_tokens == 10


def test_retries_healings_and_compactions_are_counted_by_kind() -> None:
    stats = RunStats()
    stats.count_retry("truncated_arguments")
    stats.count_retry("truncated_arguments")
    stats.count_retry("tool_lost")
    stats.count_healings(
        [Healing(kind="missing_answer_added", index=None, detail="x")] * 2
        + [Healing(kind="orphan_answer_dropped", index=3, detail="y")]
    )
    stats.count_compaction(
        CompactionRecord(kind="elided", before_chars=10, after_chars=5, elided_call_ids=["a", "b"])
    )
    stats.count_compaction(
        CompactionRecord(
            kind="custom", before_chars=10, after_chars=5, healed=["missing_answer_added"]
        )
    )
    assert stats.retries == {"truncated_arguments": 2, "tool_lost": 1}
    assert stats.healed == {"missing_answer_added": 3, "orphan_answer_dropped": 1}
    assert stats.compactions == {"elided": 1, "custom": 1} and stats.elided_results == 2


def test_folding_a_childs_stats_adds_every_number_and_keeps_the_run_s_own_apart() -> None:
    parent = RunStats(turns=3, tool_calls=2, cost_usd=0.5, retries={"a": 1}, healed={"x": 1})
    grandchild = RunStats(turns=6, cost_usd=0.125, retries={"c": 1})
    child = RunStats(
        turns=4,
        tool_calls=5,
        prompt_tokens=7,
        cost_usd=0.25,
        unpriced_calls=1,
        retries={"a": 2, "b": 1},
        compactions={"elided": 1},
        children=grandchild,
    )
    parent.fold_child(child)
    assert (parent.turns, parent.tool_calls, parent.cost_usd) == (3, 2, 0.5)  # its own
    folded = parent.children
    assert folded is not None and folded.children is None
    assert folded.turns == 10
    assert (folded.tool_calls, folded.prompt_tokens, folded.unpriced_calls) == (5, 7, 1)
    assert folded.cost_usd == pytest.approx(0.375)
    assert folded.retries == {"a": 2, "b": 1, "c": 1}
    assert folded.compactions == {"elided": 1}
    assert child.retries == {"a": 2, "b": 1}  # the child's own numbers are untouched


def test_stats_and_runs_that_leave_out_the_optional_fields_load_with_their_defaults() -> None:
    old_stats = {
        "turns": 2,
        "model_attempts": 2,
        "tool_calls": 1,
        "tool_errors": 0,
        "tool_replays": 0,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "defect_retries": {},
    }
    stats = RunStats.model_validate(old_stats)
    assert (stats.cost_usd, stats.retries, stats.healed, stats.children) == (0.0, {}, {}, None)
    carried = CarriedState.model_validate(
        {"transcript": [], "packed_receipts": {}, "stats": old_stats, "turn": 2}
    )
    assert carried.stats == stats
    run = RunInput.model_validate({"endpoint": "e", "model": "m", "prompt": "p"})
    assert run.provider_profile == "portable" and run.prices == {}
    assert run.limits.compaction is None
