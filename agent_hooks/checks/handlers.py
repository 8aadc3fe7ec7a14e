"""Handlers area: every user handler that is switched on must be ready (``agent-hook hooks check``),
and the configuration directory and the managed handlers are private (0700 directories, 0600 files)."""

from __future__ import annotations

import os
import shlex
import stat

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check

FILE_MODE, DIR_MODE = 0o600, 0o700


@check("handlers", order=80)
def handlers(ctx: Context) -> list[Check]:
    """A broken handler that is switched on is ✗; one that will not run here, or has warnings, is !."""
    from agent_hooks.cli.hooks import doctor_rows

    rows = [Check("handlers", *row) for row in doctor_rows(ctx.project_dir, ctx.cfg, ctx.paths)]
    modes = private_modes(ctx.paths.config_dir)
    return rows + ([modes] if modes is not None else [])


def private_modes(config_dir: str) -> Check | None:
    """The modes of the configuration directory, ``hooks/`` and each managed handler in it: code that
    every hook call runs. ✗ when others can write any of it (they would run code as you), ! when they
    can read it. The executable ``handler`` is 0700. None when the directory does not exist."""
    from agent_hooks.handlers import discovery

    if not os.path.isdir(config_dir):
        return None
    managed = discovery.managed_dir(config_dir)
    want = [(config_dir, DIR_MODE)]
    if os.path.isdir(managed):
        want.append((managed, DIR_MODE))
        try:
            names = sorted(os.listdir(managed))
        except OSError:
            names = []
        for name in names:
            d = os.path.join(managed, name)
            if name.startswith(".") or os.path.islink(d) or not os.path.isdir(d):
                continue
            want += [(d, DIR_MODE), (os.path.join(d, discovery.HOOK_MD), FILE_MODE),
                     (os.path.join(d, discovery.PY_ENTRY), FILE_MODE), (os.path.join(d, discovery.EXEC_ENTRY), DIR_MODE)]
    wrong = []
    for path, mode in want:
        try:
            got = stat.S_IMODE(os.lstat(path).st_mode)
        except OSError:
            continue
        if got != mode:
            wrong.append((path, got, mode))
    if not wrong:
        return Check("handlers", OK, f"{config_dir} and its handlers are private (0700 directories, 0600 files)")
    text = ", ".join(f"{f} is {m:03o} (expected {w:03o})" for f, m, w in wrong)
    fix = "; ".join(f"chmod {w:o} {shlex.quote(f)}" for f, _, w in wrong)
    data = {"modes": {f: f"{m:03o}" for f, m, _ in wrong}}
    if any(m & 0o022 for _, m, _ in wrong):
        return Check("handlers", FAIL, f"writable by others: {text}; the hooks run this configuration and these"
                     " handlers, so whoever can write them runs code as you", fix, data)
    return Check("handlers", WARN, f"not private: {text}; files agent-hook creates are 0600 in 0700 directories",
                 fix, data)
