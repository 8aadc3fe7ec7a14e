"""Money as a person reads it, one rule for the CLI and the board (agent_hooks.money; the board's twin is
checked against it in tests/center/test_board_phone.py)."""

from __future__ import annotations

import pytest

from agent_hooks.money import usd


@pytest.mark.parametrize(("value", "text"), [
    (0, "0¢"), (0.0, "0¢"), (-0.0, "0¢"), (0.00001, "<0.1¢"), (0.000499, "<0.1¢"), (0.0005, "0.1¢"),
    (0.004, "0.4¢"), (0.035, "3.5¢"), (0.03, "3.0¢"), (0.0995, "10¢"), (0.09949, "9.9¢"), (0.125, "13¢"),
    (0.38, "38¢"), (0.9949, "99¢"), (0.995, "$1.00"), (1, "$1.00"), (1.25, "$1.25"), (1.006, "$1.01"),
    (1234.5, "$1,234.50"), (-2.5, "-$2.50"), (None, "0¢"), ("x", "0¢"), (float("nan"), "0¢"), (float("inf"), "0¢"),
])
def test_dollars_from_a_dollar_up_cents_below(value: object, text: str) -> None:
    assert usd(value) == text  # type: ignore[arg-type]


def test_the_cli_prints_money_so() -> None:
    from agent_hooks.cli.cost import usd_text

    assert usd_text(0.38) == "38¢" and usd_text(0.002) == "0.2¢" and usd_text(12.5, unpriced=1) == "$12.50 + unpriced" and usd_text(None) == "unpriced"
