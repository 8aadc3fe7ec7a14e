"""Notifications: the time from a request for a person to its channel's receipt.

    .venv/bin/python bench/bench_notify.py [--requests 20] [--runs 3]

Each run starts a real resident server whose one channel is a JSON webhook (Apprise ``json://``) on a
receiver on 127.0.0.1, then makes ``--requests`` permission requests one after the other with the
installed PermissionRequest executable. For each: from the request's row being written (its
``created_at``) to the receiver having the notification; then it is answered (POST /api/approvals) and
the next one made. Prints p50 / p95 of each run, and the spread of both over the runs. The server's
look at the store (board.poll_interval_s, 0.1 s) is most of it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.approvals import PERMISSION, Held  # noqa: E402
from support.center import Center  # noqa: E402
from support.receiver import Receiver  # noqa: E402


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def one_run(n: int) -> list[float]:
    took: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Receiver() as receiver:
        env = {"AGENT_HOOKS__NOTIFY__CHANNELS": json.dumps([{"url": receiver.url}]),
               "AGENT_HOOKS__NOTIFY__RENOTIFY_S": "0", "AGENT_HOOKS__FORWARD__ENABLED": "false"}
        center = Center(Path(tmp) / "home", env=env).start()
        hook_env = {"AGENT_HOOKS_HOME": str(center.home), "HOME": center.env["HOME"], "TMUX": "", "TMUX_PANE": "",
                    **env}
        try:
            # One request first, not counted: Apprise's first import in the server's sender thread.
            for i in range(n + 1):
                held = Held({**PERMISSION, "session_id": f"bench-{i}"}, hook_env)
                receiver.wait(i + 1, timeout=30)
                rows = center.http.get("/api/approvals").json()["approvals"]
                row = next(r for r in rows if r["session_id"] == f"bench-{i}")
                if i:
                    took.append(receiver.times[i] - row["created_at"])
                center.http.post(f"/api/approvals/{row['id']}", json={"decision": "allow"})
                held.answer()
        finally:
            center.stop()
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    p50s, p95s = [], []
    for run in range(1, args.runs + 1):
        took = [t * 1000 for t in one_run(args.requests)]
        p50s.append(statistics.median(took))
        p95s.append(pct(took, 0.95))
        print(f"run {run}: request -> channel receipt over {len(took)} requests: p50 {p50s[-1]:.0f} ms,"
              f" p95 {p95s[-1]:.0f} ms (min {min(took):.0f}, max {max(took):.0f})")
    print(f"over {args.runs} runs: p50 {statistics.median(p50s):.0f} ms (spread {min(p50s):.0f}-{max(p50s):.0f}),"
          f" p95 {statistics.median(p95s):.0f} ms (spread {min(p95s):.0f}-{max(p95s):.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
