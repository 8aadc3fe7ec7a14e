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
