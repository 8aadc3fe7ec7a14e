"""Make the board's PNG icons (agent_hooks/center/static/icons/icon-192.png and icon-512.png) from icon.svg,
drawn by headless Chromium (no image library). The PNGs are committed; run this again after changing the SVG.

    .venv/bin/python docs/board_icons.py
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

ICONS = Path(__file__).resolve().parent.parent / "agent_hooks" / "center" / "static" / "icons"
CHROMIUM = "/usr/bin/chromium"


def main() -> int:
    svg = (ICONS / "icon.svg").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        for size in (192, 512):
            page = Path(tmp) / f"icon-{size}.html"
            page.write_text("<!doctype html><style>html,body{margin:0;background:#1d2330}svg{display:block;"
                            f"width:{size}px;height:{size}px}}</style>{svg}")
            out = ICONS / f"icon-{size}.png"
            subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--window-size={size},{size}", f"--screenshot={out}", page.as_uri()],
                           check=True, capture_output=True, timeout=60)
            print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
