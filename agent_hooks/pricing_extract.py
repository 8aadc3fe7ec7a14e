"""Derive ``agent_hooks/data/prices.json`` from the ``genai-prices`` package.

Run by ``agent-hook cost refresh-prices`` after upgrading genai-prices
(``pip install -U genai-prices``); never on the hook path. Only the Anthropic
provider is kept (Claude Code's models), with each model's match rules, its
dated prices and its fast-mode variant. Batch variants are left out: Claude
Code does not use the batch API.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

from agent_hooks.pricing import DATA_PATH, PRICE_KEYS


def _num(value: Decimal) -> float:
    return float(value)


def _price(value: Any) -> Any:
    from genai_prices.types import TieredPrices

    if isinstance(value, TieredPrices):
        return {"base": _num(value.base), "tiers": [{"start": t.start, "price": _num(t.price)} for t in value.tiers]}
    return _num(value)


def _prices(model_price: Any) -> dict[str, Any]:
    return {key: _price(getattr(model_price, key)) for key in PRICE_KEYS
            if getattr(model_price, key, None) is not None}


def _clause(clause: Any) -> dict[str, Any]:
    from genai_prices import types as t

    if isinstance(clause, t.ClauseOr):
        return {"or": [_clause(c) for c in clause.or_]}
    if isinstance(clause, t.ClauseAnd):
        return {"and": [_clause(c) for c in clause.and_]}
    for kind in ("equals", "starts_with", "ends_with", "contains", "regex"):
        if hasattr(clause, kind):
            return {kind: getattr(clause, kind)}
    raise ValueError(f"unknown match clause {clause!r}")


def _start(constraint: Any) -> str | None:
    if constraint is None:
        return None
    start = getattr(constraint, "start_date", None)
    if start is None:
        raise ValueError(f"unsupported price constraint {constraint!r}")
    return start.isoformat()


def extract() -> dict[str, Any]:
    """The Anthropic models of the installed genai-prices, as prices.json holds them."""
    from importlib.metadata import version

    from genai_prices import data as gdata
    from genai_prices.types import ModelPrice

    provider = next(p for p in gdata.providers if p.id == "anthropic")
    models = []
    for m in provider.models:
        conds = ([{"start_date": None, "prices": _prices(m.prices)}] if isinstance(m.prices, ModelPrice)
                 else [{"start_date": _start(c.constraint), "prices": _prices(c.prices)} for c in m.prices])
        variants = [{"when": dict(v.when), "start_date": _start(v.constraint), "prices": _prices(v.prices)}
                    for v in m.price_variants or () if set(v.when) == {"speed"}]
        models.append({"id": m.id, "name": m.name, "match": _clause(m.match), "prices": conds, "variants": variants})
    return {"source": f"genai-prices {version('genai-prices')}", "provider": "anthropic", "models": models}


def write(path: str = DATA_PATH) -> dict[str, Any]:
    """Extract and write the data set; returns it."""
    result = extract()
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)
    return result
