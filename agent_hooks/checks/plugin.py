"""Plugin area: agent-hooks installed as a Claude Code plugin, and never wired twice.

The client records the install in ``~/.claude/plugins/installed_plugins.json``
and enables it in the user settings (``enabledPlugins``); the plugin builds its
environment in its data directory (agent_hooks/wiring/plugin.py).
"""

from __future__ import annotations

import os

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check
from agent_hooks.wiring import plugin


@check("plugin", order=12)
def plugin_install(ctx: Context) -> list[Check]:
    """Where the plugin's environment is, its version, and whether it is built."""
    found = plugin.installed()
    if found is None:
        return []
    data = {"install_path": found.install_path, "version": found.version, "enabled": found.enabled,
            "env_dir": found.env_dir, "built": found.built}
    ctx.facts["plugin"] = data
    if not found.enabled:
        return [Check("plugin", OK, f"plugin {plugin.PLUGIN_ID} {found.version} installed but disabled", data=data)]
    where = f"plugin {plugin.PLUGIN_ID} {found.version}: environment {found.env_dir}"
    if found.built:
        return [Check("plugin", OK, f"{where}, built", data=data)]
    log = os.path.join(found.data_dir, "build.log")
    if found.building:
        return [Check("plugin", WARN, f"{where} is being built; until then its hooks let everything through",
                      f"wait for the build (log: {log})", data)]
    if os.path.exists(os.path.join(found.data_dir, "build.failed")):
        return [Check("plugin", FAIL, f"{where}: the last build failed; its hooks let everything through",
                      f"read {log}, fix the cause, then start a Claude Code session (it builds again)", data)]
    return [Check("plugin", WARN, f"{where} is not built yet; until then its hooks let everything through",
                  "start a Claude Code session: its first hook builds the environment", data)]


@check("plugin", order=21)
def one_wiring(ctx: Context) -> list[Check]:
    """The plugin and settings entries of ours both active: every hook would run twice."""
    found = plugin.active()
    if found is None or not ctx.wired:
        return []
    return [Check("plugin", FAIL, f"our hooks are wired twice: by the plugin {plugin.PLUGIN_ID} and by settings "
                  f"entries ({len(ctx.wired)} events), so every hook runs twice",
                  f"keep one: agent-hook settings uninstall (the settings entries), or {plugin.REMOVE_PLUGIN}",
                  {"events": sorted(ctx.wired)})]
