from __future__ import annotations

from agent_hooks.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
