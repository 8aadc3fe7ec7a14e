"""Model prices for Claude Code's usage, offline and standard-library only.

The prices are pydantic's ``genai-prices`` data set (its Anthropic provider),
extracted into ``agent_hooks/data/prices.json`` by ``agent-hook cost
refresh-prices`` (agent_hooks/pricing_extract.py), so the hook path loads a
small JSON file instead of importing the library and its pydantic models.
The arithmetic follows the data set's own: a tier applies to all tokens once
the request's whole input (uncached + cache writes + cache reads) passes its
start; a one-hour cache write is priced at its own rate when the model has
one; ``speed: fast`` selects the fast-mode variant per price key. A test
checks this arithmetic against ``genai_prices.calc_price`` for every model.

Config ``[cost.prices."MODEL"]`` overrides (key by key) or adds a model's prices, in USD
per million tokens: ``input_mtok``, ``output_mtok``, ``cache_write_mtok``,
``cache_write_1h_mtok``, ``cache_read_mtok``. A model matching nothing is
unpriced (:func:`price` returns None), never $0.
"""

from __future__ import annotations

import json
import os
import re

# Annotations only: importing typing costs the hook path ~2 ms per call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DATA_PATH = os.path.join(os.path.dirname(__file__), "data", "prices.json")
PRICE_KEYS = ("input_mtok", "output_mtok", "cache_write_mtok", "cache_write_1h_mtok", "cache_read_mtok",
              "web_searches_kcount")
_DATA: dict[str, Any] | None = None


def data() -> dict[str, Any]:
    """The shipped data set (loaded once per process)."""
    global _DATA
    if _DATA is None:
        with open(DATA_PATH, encoding="utf-8") as fh:
            _DATA = json.load(fh)
    return _DATA


def _matches(clause: dict[str, Any], ref: str) -> bool:
    if "or" in clause:
        return any(_matches(c, ref) for c in clause["or"])
    if "and" in clause:
        return all(_matches(c, ref) for c in clause["and"])
    if "equals" in clause:
        return ref == clause["equals"]
    if "starts_with" in clause:
        return ref.startswith(clause["starts_with"])
    if "ends_with" in clause:
        return ref.endswith(clause["ends_with"])
    if "contains" in clause:
        return clause["contains"] in ref
    if "regex" in clause:
        return re.search(clause["regex"], ref) is not None
    return False


def find_model(model: str, dataset: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The data set's entry for a model name as the transcript spells it, or None."""
    ref = model.lower()
    for entry in (dataset or data())["models"]:
        if _matches(entry["match"], ref):
            return entry
    return None


def _prices_at(entry: dict[str, Any], day: str | None, speed: str | None) -> dict[str, Any]:
    """The entry's prices in force on ``day`` (ISO date; None: the newest), with the fast variant applied."""
    chosen = entry["prices"][0]["prices"]
    # The last price whose start date has come takes precedence (as the data set resolves it).
    for cond in reversed(entry["prices"]):
        start = cond.get("start_date")
        if start is None or day is None or day >= start:
            chosen = cond["prices"]
            break
    if speed:
        for variant in entry.get("variants") or ():
            if variant["when"].get("speed") == speed and (
                    variant.get("start_date") is None or day is None or day >= variant["start_date"]):
                chosen = {**chosen, **variant["prices"]}
    return chosen


def _rate(price: Any, total_input: int) -> float:
    if isinstance(price, dict):  # {"base": x, "tiers": [{"start": n, "price": y}, ...]} ascending
        rate = price["base"]
        for tier in reversed(price["tiers"]):
            if total_input > tier["start"]:
                return tier["price"]
        return rate
    return price


def tokens(usage: dict[str, Any]) -> tuple[int, int, int, int, int, int]:
    """(input, output, cache writes, of which 1-hour, cache reads, web searches) from a ``usage`` object."""
    def num(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    raw_creation = usage.get("cache_creation")
    creation = raw_creation if isinstance(raw_creation, dict) else {}
    raw_server = usage.get("server_tool_use")
    server = raw_server if isinstance(raw_server, dict) else {}
    write = num(usage.get("cache_creation_input_tokens"))
    return (num(usage.get("input_tokens")), num(usage.get("output_tokens")), write,
            min(write, num(creation.get("ephemeral_1h_input_tokens"))), num(usage.get("cache_read_input_tokens")),
            num(server.get("web_search_requests")))


def cost(prices: dict[str, Any], inp: int, out: int, write: int, write_1h: int, read: int, searches: int = 0) -> float:
    """USD for one message's tokens at ``prices`` (USD per million tokens; searches per thousand)."""
    total_input = inp + write + read
    p_in, p_out = prices.get("input_mtok"), prices.get("output_mtok")
    p_w, p_w1, p_r = prices.get("cache_write_mtok"), prices.get("cache_write_1h_mtok"), prices.get("cache_read_mtok")
    # Tokens of a kind the model has no price for are counted as the kind they belong to (plain input).
    uncached = inp
    usd = 0.0
    if p_r is not None:
        usd += _rate(p_r, total_input) * read
    else:
        uncached += read
    if p_w1 is not None:
        usd += _rate(p_w1, total_input) * write_1h
        rest = write - write_1h
    else:
        rest = write
    if p_w is not None:
        usd += _rate(p_w, total_input) * rest
    else:
        uncached += rest
    if p_in is not None:
        usd += _rate(p_in, total_input) * uncached
    if p_out is not None:
        usd += _rate(p_out, total_input) * out
    usd /= 1_000_000
    if searches and prices.get("web_searches_kcount") is not None:
        usd += _rate(prices["web_searches_kcount"], total_input) * searches / 1000
    return usd


def price(model: str, usage: dict[str, Any], day: str | None = None, overrides: dict[str, Any] | None = None,
          dataset: dict[str, Any] | None = None) -> float | None:
    """USD for one assistant message's ``usage`` by ``model``; None when the model cannot be priced."""
    speed = usage.get("speed") if isinstance(usage.get("speed"), str) else None
    override = _override(model, overrides)
    entry = find_model(model, dataset)
    prices = _prices_at(entry, day, speed) if entry is not None else None
    if override:  # over the data set's prices, key by key (a model it lacks: the override alone)
        prices = {**(prices or {}), **override}
    if not prices:
        return None
    return cost(prices, *tokens(usage))


def _override(model: str, overrides: dict[str, Any] | None) -> dict[str, Any] | None:
    """Config prices for the model: an exact name first, then the longest name it starts with."""
    if not overrides:
        return None
    if isinstance(overrides.get(model), dict):
        return _numbers(overrides[model])
    best = None
    for name, prices in overrides.items():
        if isinstance(prices, dict) and model.startswith(name) and (best is None or len(name) > len(best)):
            best = name
    return _numbers(overrides[best]) if best is not None else None


def _numbers(prices: dict[str, Any]) -> dict[str, Any]:
    """The override's usable prices (config validation names the others)."""
    return {k: v for k, v in prices.items() if k in PRICE_KEYS and isinstance(v, (int, float))
            and not isinstance(v, bool) and v == v and v >= 0}
