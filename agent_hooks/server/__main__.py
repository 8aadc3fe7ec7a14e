"""``python -m agent_hooks.server [--log-file] [--replace]``: serve in the foreground (what
`start` and SessionStart spawn); ``--replace`` stops a server of another build first."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    from agent_hooks import config as config_mod
    from agent_hooks.paths import Paths
    from agent_hooks.server.process import ServerError, run

    args = sys.argv[1:] if argv is None else argv
    paths = Paths(os.environ)
    config, problems = config_mod.load_lenient(paths, os.environ)
    for problem in problems:
        print(f"agent-hooks server: configuration: {problem}", file=sys.stderr)
    try:
        run(paths, config, os.environ, log_file="--log-file" in args, replace="--replace" in args)
    except ServerError as exc:
        print(f"agent-hooks server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
