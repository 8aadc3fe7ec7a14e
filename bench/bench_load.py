"""Issue 12, item 7: rows lost under load? Runs the load test N times and prints recorded/read.

200 PostToolUse processes started together on one session, payloads written
once all have started, 4 busy loops on the cores; every call whose payload was
read must be recorded (at once, or replayed from the spool), none twice, and
no answer may come past the deadline. Target: recorded == read over 5 runs
(1,000 of 1,000 when every process reads its payload in time).

    .venv/bin/python bench/bench_load.py [--runs 5] [--processes 200] [--busy 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.load import run_load  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument("--busy", type=int, default=4)
    parser.add_argument("--deadline-ms", type=int, default=4000)
    args = parser.parse_args()
    totals = {"processes": 0, "read": 0, "recorded": 0, "rows": 0, "spooled": 0, "late_answers": 0,
              "nonzero_exits": 0, "internal_errors": 0}
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="agent-hooks-load-") as tmp:
            r = run_load(Path(tmp) / "home", args.processes, args.busy, args.deadline_ms)
        for key in totals:
            totals[key] += r[key]
        print(f"run {run}: recorded {r['recorded']} of {r['read']} read ({r['processes']} started,"
              f" {r['unread']} gave up before their payload came), rows {r['rows']}, spooled {r['spooled']},"
              f" late answers {r['late_answers']}, slowest exit {r['max_exit_after_write_s']} s after the write,"
              f" non-zero exits {r['nonzero_exits']}, internal errors {r['internal_errors']}", flush=True)
    print(f"total: recorded {totals['recorded']} of {totals['read']} read ({totals['processes']} started);"
          f" rows {totals['rows']}; spooled {totals['spooled']}; late answers {totals['late_answers']};"
          f" non-zero exits {totals['nonzero_exits']}; internal errors {totals['internal_errors']}")
    ok = totals["recorded"] == totals["read"] == totals["rows"] and not totals["late_answers"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
