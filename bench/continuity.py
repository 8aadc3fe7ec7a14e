"""Wall time of the continuity hooks, as Claude Code runs them (installed console scripts).

Prints median and max milliseconds of N runs for: Stop without a transcript,
Stop on the real fixture transcript, Stop on a 50 MB transcript (only its tail
is read), PreCompact with a task, and SessionStart of a lead beside 12 live
sessions; and for reference `python -c "import json, sqlite3"`.

    .venv/bin/python bench/continuity.py [-n 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "claude-code-2.1.197"  # the pinned client
BIN = Path(sys.executable).parent


def timed(cmd: list[str], payload: dict | None, env: dict[str, str], n: int) -> tuple[float, float]:
    data = json.dumps(payload).encode() if payload is not None else b""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, input=data, env=env, capture_output=True, check=True)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), max(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-continuity-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HOOKS")}
        env.update(AGENT_HOOKS_HOME=str(root / "state"), HOME=str(root / "home"))
        proj = root / "home" / ".claude" / "projects" / "p"
        proj.mkdir(parents=True)
        small = proj / "small.jsonl"
        shutil.copy(FIXTURES / "transcript-sample.jsonl", small)
        huge = proj / "huge.jsonl"
        shutil.copy(small, huge)
        line = json.dumps({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "x" * 200_000}]}}) + "\n"
        with open(huge, "a") as f:
            for _ in range(250):
                f.write(line)
            f.write(small.read_text())
        subprocess.run([str(BIN / "agent-hook"), "init"], env=env, capture_output=True, check=True)
        start = json.loads((FIXTURES / "SessionStart-startup.json").read_text())
        for i in range(12):
            subprocess.run([str(BIN / "agent-hook-session-start")], input=json.dumps({**start, "session_id": f"w{i}"}).encode(),
                           env={**env, "AGENT_HOOKS_AGENT": f"worker-{i}"}, capture_output=True, check=True)
        stop = json.loads((FIXTURES / "Stop.json").read_text())
        pre = json.loads((FIXTURES / "PreCompact-manual.json").read_text())
        rows = [
            ("python -c 'import json, sqlite3'", [sys.executable, "-c", "import json, sqlite3"], None, env),
            ("Stop, no transcript", [str(BIN / "agent-hook-stop")], {**stop, "transcript_path": ""}, env),
            ("Stop, fixture transcript", [str(BIN / "agent-hook-stop")], {**stop, "transcript_path": str(small)}, env),
            (f"Stop, {huge.stat().st_size // 2**20} MB transcript", [str(BIN / "agent-hook-stop")],
             {**stop, "transcript_path": str(huge)}, env),
            ("PreCompact with a task", [str(BIN / "agent-hook-pre-compact")], {**pre, "transcript_path": str(small)},
             {**env, "AGENT_HOOKS_TASK_ID": "T-1"}),
            ("SessionStart, lead beside 12 sessions", [str(BIN / "agent-hook-session-start")],
             {**start, "session_id": "lead"}, {**env, "AGENT_HOOKS_ROLE": "lead"}),
        ]
        print(f"{'case':44} {'median ms':>10} {'max ms':>8}   (n={args.n})")
        for name, cmd, payload, e in rows:
            med, worst = timed(cmd, payload, e, args.n)
            print(f"{name:44} {med:10.1f} {worst:8.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
