"""Doctor's checklist, contributed by each area in its own module.

Every module in this package is an area (install, settings, store, config,
errors, forward, queue, run, ...). It registers its checks with one line::

    @check("store", order=30)
    def store_files(ctx: Context) -> list[Check]: ...

A check reads what it needs from the :class:`Context` (paths, configuration,
the store connection another check opened) and returns lines of the
checklist; ``order`` places it in the list (bands: 10 install, 20 settings,
30 store, 40 config, 50 errors, 60 forward and servers, 70 queue, 80
handlers and board, 90 the synthetic run). Modules are found by
:func:`discover`, so a new area needs no edit here or in ``cli/doctor.py``.
A check that raises becomes a ✗ line naming it, never a crashed doctor.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sqlite3
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_hooks.paths import Paths

OK, WARN, FAIL = "ok", "warn", "fail"
MARK = {OK: "✓", WARN: "!", FAIL: "✗"}


@dataclass
class Check:
    """One line of the checklist: area (its label), status, what was found, how to fix it."""

    area: str
    status: str
    summary: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What checks share: where things are, and what earlier checks found.

    ``cfg`` is the configuration the hooks run on (loaded leniently on first
    use, as the hooks load it); ``conn`` is an open store connection when
    the store check found it usable (schema current), else None; ``wired``
    is event -> the commands of ours the settings files run.
    """

    paths: Paths
    project_dir: str
    bin_dir: str
    synthetic: bool = True
    now: float = field(default_factory=time.time)
    conn: sqlite3.Connection | None = None
    wired: dict[str, list[str]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    _cfg: dict[str, Any] | None = None

    @property
    def cfg(self) -> dict[str, Any]:
        if self._cfg is None:
            # Loaded here, not by the config area (checks/config.py imports this package: no circle);
            # that area checks the file itself when its turn comes.
            from agent_hooks import config as config_mod

            self._cfg, _problems = config_mod.load_lenient(self.paths, os.environ)
        return self._cfg

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


CheckFn = Callable[[Context], list[Check]]


@dataclass(frozen=True)
class Registered:
    area: str
    order: int
    fn: CheckFn


REGISTRY: list[Registered] = []


def check(area: str, order: int) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as a check of ``area``, at position ``order`` in the checklist."""

    def register(fn: CheckFn) -> CheckFn:
        REGISTRY.append(Registered(area, order, fn))
        return fn

    return register


def discover() -> list[Registered]:
    """Import every area module of this package once; the registered checks in checklist order."""
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    # Stable sort: checks of one order keep their registration order.
    return sorted(REGISTRY, key=lambda r: r.order)


def run_all(ctx: Context) -> list[Check]:
    """Every registered check against ``ctx``, in order; the store connection is closed afterwards."""
    out: list[Check] = []
    try:
        for reg in discover():
            try:
                out.extend(reg.fn(ctx))
            except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
                out.append(Check(reg.area, FAIL, f"the check {reg.fn.__name__} crashed: {type(exc).__name__}: {exc}",
                                 "a bug in agent-hooks: please report it with this line",
                                 {"traceback": traceback.format_exc()}))
    finally:
        ctx.close()
    return out


def default_context(project_dir: str, bin_dir: str, synthetic: bool = True) -> Context:
    """A context for this environment (``$AGENT_HOOKS_HOME`` / XDG paths)."""
    return Context(Paths(os.environ), project_dir, bin_dir, synthetic)
