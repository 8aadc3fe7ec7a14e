"""Whether a handler may run here and now: pure checks, each failing one with a reason a user can read.

Requirements as OpenClaw's hook loader gives them (``os``; every one of ``bins`` on PATH, at
least one of ``anyBins``; the ``env`` variables set; the ``config`` paths
truthy; ``always`` skips these), then whom it applies to (``agents``,
``roles``), then whether the operator turned it on (switches.switched_on, which
the hook path needs for every handler). ``hooks list -v`` prints the reasons.
The hook path imports this module only for a handler with something to check
(registry.conditional).
"""

from __future__ import annotations

import os

from agent_hooks.handlers.switches import entry_of, switched_on

# Annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

READY, DISABLED, INELIGIBLE, BROKEN = "ready", "disabled", "ineligible", "broken"


def which(name: str, path_var: str | None) -> bool:
    """True when ``name`` is an executable file in one of ``path_var``'s directories (shutil.which, minus its import)."""
    if os.sep in name:
        return os.path.isfile(name) and os.access(name, os.X_OK)
    for d in (path_var or "").split(os.pathsep):
        candidate = os.path.join(d or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return True
    return False


def config_value(config: Mapping[str, Any], dotted: str) -> Any:
    """The value at ``a.b.c`` in the configuration, or None."""
    value: Any = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def requirement_reasons(h: dict[str, Any], platform: str, env: Mapping[str, str], config: Mapping[str, Any],
                        has_bin: Callable[[str], bool]) -> list[str]:
    """Why the requirements are not met (empty when met, or when ``always`` is set)."""
    if h.get("always"):
        return []
    out = []
    if h["os"] and platform not in h["os"]:
        out.append(f"os is {platform}, the handler needs one of {', '.join(h['os'])}")
    req = h["requires"]
    missing = [b for b in req.get("bins") or [] if not has_bin(b)]
    if missing:
        out.append(f"not on PATH: {', '.join(missing)}")
    any_bins = req.get("anyBins") or []
    if any_bins and not any(has_bin(b) for b in any_bins):
        out.append(f"none of these on PATH: {', '.join(any_bins)}")
    unset = [v for v in req.get("env") or [] if not env.get(v)]
    if unset:
        out.append(f"environment variable not set: {', '.join(unset)}")
    falsy = [c for c in req.get("config") or [] if not config_value(config, c)]
    if falsy:
        out.append(f"config not set: {', '.join(falsy)}")
    return out


def audience_reasons(h: dict[str, Any], agent: str, role: str) -> list[str]:
    """Why the handler is not for this agent or role (``agents``, ``roles``; empty lists mean everyone)."""
    out = []
    if h["agents"] and agent not in h["agents"]:
        out.append(f"for agents {', '.join(h['agents'])}, not {agent}")
    if h["roles"] and role not in h["roles"]:
        out.append(f"for roles {', '.join(h['roles'])}, not {role}")
    return out


def evaluate(h: dict[str, Any], platform: str, env: Mapping[str, str], config: Mapping[str, Any], agent: str,
             role: str, has_bin: Callable[[str], bool] | None = None) -> tuple[str, list[str]]:
    """(status, reasons): ready, or broken / disabled / ineligible with every reason that applies."""
    if h["errors"]:
        return BROKEN, list(h["errors"])
    if has_bin is None:
        path_var = env.get("PATH")
        has_bin = lambda b: which(b, path_var)  # noqa: E731
    off = switched_on(h, entry_of(config, h["name"]))
    reasons = requirement_reasons(h, platform, env, config, has_bin) + audience_reasons(h, agent, role)
    if off:
        return DISABLED, [off] + reasons
    return (INELIGIBLE, reasons) if reasons else (READY, [])
