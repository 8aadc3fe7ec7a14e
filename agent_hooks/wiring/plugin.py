"""The Claude Code plugin: its hooks.json (from the event table) and where an installed plugin lives.

This repository is a marketplace named ``agent-hooks`` holding one plugin of
the same name (``.claude-plugin/``, docs/install.md). The plugin's hooks run
the executables of an environment the plugin builds in its data directory
(``$CLAUDE_PLUGIN_DATA/env-<version>``, by ``.claude-plugin/bootstrap.sh``),
through a launcher that passes every call through (exit 0, no output) until
that environment is ready. The environment's directory carries the version, so
a new version of the plugin finds no ready environment and fails open until
its own is built.

The hooks block is generated from the same table and timeouts as
``settings install`` (``our_groups``), so the two wirings cannot drift; a test
compares the committed file with :func:`hooks_document`.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_hooks import config as config_mod
from agent_hooks.wiring.entries import PLACEHOLDER, our_groups
from agent_hooks.wiring.table import HOOKS

NAME = "agent-hooks"
MARKETPLACE = "agent-hooks"
PLUGIN_ID = f"{NAME}@{MARKETPLACE}"
# Paths inside the plugin (its root is the repository's root; .claude-plugin/ keeps the top level as it was).
HOOKS_FILE = ".claude-plugin/hooks.json"
BOOTSTRAP = ".claude-plugin/bootstrap.sh"
PLUGIN_MARK = "# agent-hooks plugin launcher"
READY = ".ready"


def env_dirname(version: str) -> str:
    """The environment's directory name under the data directory: one per plugin version."""
    return f"env-{version}"


def launcher(exe: str, version: str, session_start: bool = False) -> str:
    """The ``command`` of the plugin's entry for ``exe``.

    Only shell builtins on the way (as the settings launcher): when the
    environment of this version is ready (its ``.ready`` file is written last
    by the build) and the executable's interpreter exists, ``exec`` it;
    otherwise exit 0 at once, so the agent carries on. SessionStart's entry
    runs the bootstrap instead, which starts the build (detached) and tells
    the person once. ``$CLAUDE_PLUGIN_DATA`` is read from the hook's
    environment (the client sets it for plugin hooks), not substituted into
    the text.
    """
    d = f'"$CLAUDE_PLUGIN_DATA"/{env_dirname(version)}'
    run = (f'd={d}; h="$d/bin/{exe}"; if [ -n "$CLAUDE_PLUGIN_DATA" ] && [ -f "$d/{READY}" ] && [ -x "$h" ]; '
           "then IFS= read -r l <\"$h\"; case $l in '#!'*) p=${l#??}; [ -x \"${p%% *}\" ] && exec \"$h\";; "
           '*) exec "$h";; esac; fi; ')
    if session_start:
        run += (f'b="$CLAUDE_PLUGIN_ROOT/{BOOTSTRAP}"; [ -f "$b" ] && exec sh "$b" start {version}; ')
    return run + f"exit 0 {PLUGIN_MARK}"


def hooks_document(version: str, cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plugin's hooks.json: every event of ours, with the matchers and timeouts of ``settings install``."""
    cfg = cfg or copy.deepcopy(config_mod.DEFAULTS)
    groups = our_groups(PLACEHOLDER, cfg)
    exe_of = {h.event: h.executable for h in HOOKS}
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event, group in groups.items():
        group = copy.deepcopy(group)
        group["hooks"][0]["command"] = launcher(exe_of[event], version, event == "SessionStart")
        hooks[event] = [group]
    return {"description": "agent-hooks: every event into the host's store (docs/install.md)", "hooks": hooks}


def render_hooks(version: str) -> str:
    """The text of .claude-plugin/hooks.json."""
    return json.dumps(hooks_document(version), indent=2, ensure_ascii=False) + "\n"


# -- an installed plugin, as the client records it ---------------------------------------------

@dataclass(frozen=True)
class Installed:
    """The plugin as installed for this user: where its copy is, its version, and its data directory."""

    install_path: str
    version: str
    scope: str
    enabled: bool
    data_dir: str

    @property
    def env_dir(self) -> str:
        return os.path.join(self.data_dir, env_dirname(self.version))

    @property
    def built(self) -> bool:
        return os.path.isfile(os.path.join(self.env_dir, READY))

    @property
    def building(self) -> bool:
        """A build holds the lock directory, and its pid is alive."""
        try:
            with open(os.path.join(self.data_dir, "build.lock", "pid"), encoding="utf-8") as f:
                pid = int(f.read().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return False
        return True


def claude_dir(env: Mapping[str, str] | None = None) -> str:
    """The client's config directory: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    environ = os.environ if env is None else env
    if environ.get("CLAUDE_CONFIG_DIR"):
        return environ["CLAUDE_CONFIG_DIR"]
    return os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".claude")


def data_dir(env: Mapping[str, str] | None = None) -> str:
    """Where the client keeps the plugin's data (it persists across updates)."""
    return os.path.join(claude_dir(env), "plugins", "data", f"{NAME}-{MARKETPLACE}")


def installed(env: Mapping[str, str] | None = None) -> Installed | None:
    """The plugin's user install (installed_plugins.json + enabledPlugins), or None when not installed."""
    base = claude_dir(env)
    try:
        with open(os.path.join(base, "plugins", "installed_plugins.json"), encoding="utf-8") as f:
            records = json.load(f).get("plugins", {}).get(PLUGIN_ID) or []
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(records, list) or not records or not isinstance(records[0], dict):
        return None
    rec = records[0]
    enabled = False
    try:
        with open(os.path.join(base, "settings.json"), encoding="utf-8") as f:
            enabled = json.load(f).get("enabledPlugins", {}).get(PLUGIN_ID) is True
    except (OSError, ValueError, AttributeError):
        pass
    return Installed(str(rec.get("installPath", "")), str(rec.get("version", "")), str(rec.get("scope", "")),
                     enabled, data_dir(env))


def active(env: Mapping[str, str] | None = None) -> Installed | None:
    """The plugin when it is installed and enabled (its hooks run), else None."""
    found = installed(env)
    return found if found is not None and found.enabled else None


REMOVE_PLUGIN = f"claude plugin uninstall {PLUGIN_ID}"
