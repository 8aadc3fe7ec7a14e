"""Client area: the Claude Code on PATH against the newest version we tested (agent_hooks.claude_code)."""

from __future__ import annotations

from agent_hooks import claude_code
from agent_hooks.checks import OK, WARN, Check, Context, check


@check("client", order=12)
def client(ctx: Context) -> list[Check]:
    """``claude --version`` on PATH; a warning when it is newer than ``claude_code.NEWEST_TESTED``."""
    exe, version = claude_code.installed()
    newest = claude_code.NEWEST_TESTED
    if exe is None:
        return [Check("client", OK, f"no claude on PATH (not checked; tested up to Claude Code {newest})")]
    if version is None:
        return [Check("client", WARN, f"{exe} --version gave no version", "check that Claude Code runs")]
    data = {"version": version, "newest_tested": newest}
    if claude_code.newer_than_tested(version):
        return [Check("client", WARN, f"Claude Code {version} ({exe}) is newer than the newest tested, {newest}",
                      "it may send events or fields we do not know yet: they are accepted and noted in "
                      "logs/notices.log; see docs/troubleshooting.md", data)]
    return [Check("client", OK, f"Claude Code {version} ({exe}); tested up to {newest}", data=data)]


# Permission modes in which the client rarely or never opens a dialog: so almost nothing of the
# session's reaches a person through PermissionRequest (docs/approvals.md, "Which modes ask a person").
RARELY_ASKS = {
    "auto": "a classifier decides most calls itself",
    "bypassPermissions": "no call is asked about",
    "dontAsk": "calls not allowed by a rule are denied without asking",
}


def default_mode(project_dir: str) -> tuple[str | None, str | None]:
    """(permissions.defaultMode, the file that sets it) as the client reads it: the project's local
    settings over the project's over the user's; (None, None) when none sets it."""
    from agent_hooks.checks.settings import settings_files
    from agent_hooks.wiring.merge import SettingsError
    from agent_hooks.wiring.settings_file import read_settings

    found: tuple[str | None, str | None] = (None, None)
    for _scope, path in settings_files(project_dir):  # user, project, local: the later wins
        try:
            doc, _text = read_settings(path)
        except (SettingsError, OSError):
            continue  # the settings area reports a broken file
        perms = doc.get("permissions") if isinstance(doc, dict) else None
        mode = perms.get("defaultMode") if isinstance(perms, dict) else None
        if isinstance(mode, str) and mode:
            found = (mode, path)
    return found


@check("permissions", order=13)
def permission_mode(ctx: Context) -> list[Check]:
    """The mode sessions start in (permissions.defaultMode): a note when it will rarely ask a person."""
    mode, path = default_mode(ctx.project_dir)
    data = {"default_mode": mode, "set_in": path}
    if mode in RARELY_ASKS:
        return [Check("permissions", WARN,
                      f"sessions start in {mode} mode ({path}): {RARELY_ASKS[mode]}, so few permission prompts"
                      " reach the board or `agent-hook approvals`",
                      "to answer prompts from the board, set permissions.defaultMode to \"default\" (or start"
                      " with `claude --permission-mode default`); approval gates hold calls in any mode:"
                      " docs/approvals.md", data)]
    if mode is None:
        return [Check("permissions", OK, "permissions.defaultMode is not set: sessions start in the client's"
                      " default mode (auto and bypassPermissions rarely ask a person: docs/approvals.md)", data=data)]
    return [Check("permissions", OK, f"sessions start in {mode} mode ({path}): the client asks a person,"
                  " and the board shows the prompts", data=data)]
