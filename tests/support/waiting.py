"""Waiting for a condition with a deadline, never for a fixed time (docs/testing.md): under load a fixed
sleep is either too short (a flake) or too long (for every run)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, what: str = "the condition",
             show: Callable[[], Any] | None = None, step: float = 0.05) -> T:
    """``predicate()``'s first true value, asked every ``step`` seconds. Past ``timeout`` seconds the test
    fails, naming ``what`` and, when given, ``show()``: the state seen at that moment."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; saw {show()}" if show is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")
        time.sleep(step)
