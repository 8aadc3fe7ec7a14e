"""The tiers' selection: tests/e2e is skipped at collection only when -m can select none of its tests."""

from __future__ import annotations

import pytest

from support.tiers import selects_no_e2e_test


@pytest.mark.parametrize("markexpr,skips", [
    ("not e2e and not slow", True),  # the fast tier
    ("not e2e", True),
    ("slow and not e2e", True),
    ("", False),
    ("e2e", False),
    ("not slow", False),  # an e2e test is not slow: it runs
    ("slow or e2e", False),
    ("e2e and x and not y", False),  # an e2e test marked x and not y runs
    ("not (e2e or slow)", True),
    ("not e2e or slow", False),  # an e2e test marked slow runs
])
def test_e2e_is_left_uncollected_only_when_no_e2e_test_can_run(markexpr: str, skips: bool) -> None:
    assert selects_no_e2e_test(markexpr) is skips
