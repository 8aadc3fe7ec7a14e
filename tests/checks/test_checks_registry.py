"""Doctor's checklist is a registry each area contributes to (agent_hooks/checks/)."""

from __future__ import annotations

from pathlib import Path

from agent_hooks import checks
from agent_hooks.checks import FAIL, Check, Context, check, discover, run_all
from agent_hooks.paths import Paths


def test_every_area_registers_in_checklist_order() -> None:
    regs = discover()
    areas = [r.area for r in regs]
    assert areas[:2] == ["python", "executables"]
    for area in ("settings", "store", "config", "errors", "forward", "queue", "run"):
        assert area in areas, area
    assert areas.index("store") < areas.index("errors") < areas.index("queue") < areas.index("run")
    assert [r.order for r in regs] == sorted(r.order for r in regs)


def test_a_new_check_is_one_registration_and_a_crash_is_a_line(tmp_path: Path) -> None:
    @check("handlers", order=85)
    def broken(ctx: Context) -> list[Check]:
        raise RuntimeError("boom")

    try:
        ctx = Context(Paths({"AGENT_HOOKS_HOME": str(tmp_path)}), str(tmp_path), str(tmp_path), synthetic=False)
        lines = run_all(ctx)
    finally:
        checks.REGISTRY[:] = [r for r in checks.REGISTRY if r.fn is not broken]
    (crash,) = [c for c in lines if c.area == "handlers" and "crashed" in c.summary]  # beside the real area
    assert crash.status == FAIL and "broken crashed: RuntimeError: boom" in crash.summary
    # The checks after it still ran.
    assert any(c.area == "queue" or c.area == "forward" for c in lines)
    assert ctx.conn is None
