"""Which modules each hook executable imports, here and in another checkout: the same set, or what differs.

The hook path's cost is mostly what it imports, so a change that moves or
splits modules must leave each event's imports as they were. This runs
``python -X importtime -c "import agent_hooks.events.EVENT"`` for every event
module, once with this checkout first on the path and once with ``--against``
(a clone of main, say), and prints, per event, the number of modules and any
that only one side imports. It exits 1 when an event differs.

    .venv/bin/python bench/bench_imports.py --against /path/to/a/clone/of/main
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def events(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "agent_hooks" / "events").glob("*.py") if p.stem != "__init__")


def imported(root: Path, event: str) -> set[str]:
    """The modules ``import agent_hooks.events.EVENT`` loads in a fresh interpreter, with ``root`` first."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import agent_hooks.events.{event}"],
                          capture_output=True, text=True, env=env, check=True)
    names = set()
    for line in proc.stderr.splitlines()[1:]:  # "import time: self [us] | cumulative | imported package"
        parts = line.split("|")
        if len(parts) == 3:
            names.add(parts[2].strip())
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, required=True, help="another checkout of agent-hooks")
    args = ap.parse_args(argv)
    differ = 0
    for event in events(ROOT):
        here, there = imported(ROOT, event), imported(args.against.resolve(), event)
        if here == there:
            print(f"{event}: the same {len(here)} modules")
            continue
        differ += 1
        print(f"{event}: {len(here)} modules here, {len(there)} there")
        for name in sorted(here - there):
            print(f"  only here:  {name}")
        for name in sorted(there - here):
            print(f"  only there: {name}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
