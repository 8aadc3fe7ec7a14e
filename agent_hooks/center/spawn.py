"""The first process of a launched session's tmux pane: it reads its spec and becomes the client.

``python -m agent_hooks.center.spawn SPEC`` (run by tmux, see launch.py): the
spec (0600) holds the client's argument list, its environment and its
directory; it is read once and deleted, then this process execs the client,
keeping tmux's own ``TMUX`` and ``TMUX_PANE`` (a reply from the board is typed
into that pane). When the exec fails, why is written next to the spec for the
host to report, and shown in the pane for a while. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agent_hooks.center.spawn SPEC", file=sys.stderr)
        return 2
    path = args[0]
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        os.unlink(path)
        env = {str(k): str(v) for k, v in spec["env"].items()}
        for var in ("TMUX", "TMUX_PANE"):
            if os.environ.get(var):
                env[var] = os.environ[var]
        command = [str(a) for a in spec["argv"]]
        os.chdir(str(spec["cwd"]))
        os.execve(command[0], command, env)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        message = f"{type(exc).__name__}: {exc}"
        try:
            fd = os.open(path + ".error", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(message)
        except OSError:
            pass
        print(f"agent-hooks: the session could not start: {message}", file=sys.stderr)
        time.sleep(30)  # long enough for a person who attaches to read it
        return 127
    return 0  # not reached: execve replaced this process


if __name__ == "__main__":
    raise SystemExit(main())
