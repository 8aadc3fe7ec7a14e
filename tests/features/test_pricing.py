"""The shipped prices (agent_hooks/data/prices.json) against genai-prices itself."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib.metadata import version

import pytest

from agent_hooks import pricing, pricing_extract

genai_prices = pytest.importorskip("genai_prices")

USAGES = [
    {"input_tokens": 10, "output_tokens": 5},
    {"input_tokens": 1200, "output_tokens": 340, "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 90000,
     "cache_creation": {"ephemeral_5m_input_tokens": 5000, "ephemeral_1h_input_tokens": 0}},
    {"input_tokens": 3, "output_tokens": 2100, "cache_creation_input_tokens": 7000, "cache_read_input_tokens": 41000,
     "cache_creation": {"ephemeral_5m_input_tokens": 3000, "ephemeral_1h_input_tokens": 4000}},
    # Past 200k input: the long-context tier where a model has one.
    {"input_tokens": 150000, "output_tokens": 800, "cache_creation_input_tokens": 20000,
     "cache_read_input_tokens": 60000, "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                                          "ephemeral_1h_input_tokens": 20000},
     "server_tool_use": {"web_search_requests": 2}},
]


def _ref(clause: dict) -> str:
    """A model name the clause matches."""
    if "or" in clause:
        return _ref(clause["or"][0])
    if "and" in clause:
        return _ref(clause["and"][0])
    return clause.get("equals") or clause.get("starts_with") or pytest.fail(f"no name for {clause}")


def _days(entry: dict) -> list[str]:
    days = {"2025-01-01", "2026-11-25"}
    days.update(c["start_date"] for c in entry["prices"] if c["start_date"])
    return sorted(days)


def test_shipped_prices_are_the_installed_data_set_extracted() -> None:
    """prices.json is what `agent-hook cost refresh-prices` makes from the pinned genai-prices."""
    with open(pricing.DATA_PATH, encoding="utf-8") as fh:
        shipped = json.load(fh)
    assert shipped["source"] == f"genai-prices {version('genai-prices')}"
    assert shipped == json.loads(json.dumps(pricing_extract.extract()))


@pytest.mark.parametrize("entry", pricing.data()["models"], ids=lambda e: e["id"])
def test_price_equals_genai_prices(entry: dict) -> None:
    ref = _ref(entry["match"])
    assert pricing.find_model(ref)["id"] == entry["id"]
    speeds = [None] + [v["when"]["speed"] for v in entry["variants"]]
    checked = 0
    for day in _days(entry):
        when = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC)
        for speed in speeds:
            for usage in USAGES:
                u = dict(usage, speed=speed) if speed else usage
                extracted = genai_prices.extract_usage({"model": ref, "usage": u}, provider_id="anthropic")
                theirs = genai_prices.calc_price(extracted.usage, ref, provider_id="anthropic",
                                                 genai_request_timestamp=when,
                                                 price_context={"speed": speed} if speed else None)
                ours = pricing.price(ref, u, day)
                assert ours == pytest.approx(float(theirs.total_price), rel=1e-9, abs=1e-12), (ref, day, speed, u)
                checked += 1
    assert checked >= len(USAGES) * 2


def test_unknown_model_is_unpriced_not_zero() -> None:
    assert pricing.price("gpt-4o", {"input_tokens": 10, "output_tokens": 5}) is None
    assert pricing.price("<synthetic>", {"input_tokens": 0, "output_tokens": 0}) is None


def test_config_override_wins_and_can_price_an_unknown_model() -> None:
    overrides = {"my-local-model": {"input_mtok": 2.0, "output_mtok": 4.0}}
    usage = {"input_tokens": 1_000_000, "output_tokens": 500_000}
    assert pricing.price("my-local-model-7b", usage, overrides=overrides) == pytest.approx(2.0 + 2.0)
    base = pricing.price("claude-opus-4-8", usage)
    over = pricing.price("claude-opus-4-8", usage, overrides={"claude-opus-4-8": {"input_mtok": 1.0, "output_mtok": 1.0}})
    assert over == pytest.approx(1.5) and base != over


def test_a_partial_override_keeps_the_data_sets_other_prices() -> None:
    usage = {"input_tokens": 100_000, "output_tokens": 50_000}  # below every long-context tier
    base = pricing.price("claude-sonnet-4-5", usage)
    out = pricing.find_model("claude-sonnet-4-5")["prices"][-1]["prices"]["output_mtok"]
    out_rate = out["base"] if isinstance(out, dict) else out
    cheaper = pricing.price("claude-sonnet-4-5", usage, overrides={"claude-sonnet-4-5": {"input_mtok": 0.5}})
    assert cheaper == pytest.approx(0.5 * 0.1 + out_rate * 0.05) and cheaper < base
    assert pricing.price("claude-sonnet-4-5", usage, overrides={"claude-sonnet-4-5": {"input_mtok": "x"}}) == base
