"""No call whose payload was read is lost under load (marker ``load``; about a minute).

    .venv/bin/python -m pytest -m load tests/hooks/test_load.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.load import run_load


@pytest.mark.load
def test_every_call_whose_payload_was_read_is_recorded_once(hooks_home: Path) -> None:
    result = run_load(hooks_home)
    print(result)
    assert result["exited"] == result["processes"]
    assert result["nonzero_exits"] == 0 and result["stdout"] == 0 and result["internal_errors"] == 0
    assert result["recorded"] == result["read"], result
    assert result["rows"] == result["recorded"], result  # none recorded twice
    assert result["late_answers"] == 0, result
