"""Which tier a ``-m`` expression selects: shared by tests/conftest.py and tests/project/test_tiers.py.

Its own module, not conftest's: tests/e2e has a conftest too, and ``import conftest`` names
whichever was imported last.
"""

from __future__ import annotations

import itertools
import re


def selects_no_e2e_test(markexpr: str) -> bool:
    """Whether ``-m markexpr`` is false for every test marked e2e, whatever its other marks."""
    if not markexpr:
        return False
    from _pytest.mark.expression import Expression  # what -m itself evaluates

    expr = Expression.compile(markexpr)
    others = sorted(set(re.findall(r"[\w:+\-.\[\]\\/]+", markexpr)) - {"e2e", "and", "or", "not"})
    if len(others) > 10:
        return False
    for values in itertools.product((False, True), repeat=len(others)):
        marks = dict(zip(others, values, strict=True), e2e=True)
        if expr.evaluate(lambda name, marks=marks, **_kwargs: marks.get(name, False)):
            return False
    return True
