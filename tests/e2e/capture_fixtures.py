"""Capture the payloads the real Claude Code client sends, into ``tests/fixtures/claude-code-<version>/``.

    python tests/e2e/capture_fixtures.py                      # the pinned version
    python tests/e2e/capture_fixtures.py 2.1.197 2.1.330 latest

Each version is installed like the e2e tier installs it (``claude_client``;
``AGENT_HOOKS_CLAUDE_CACHE`` points at the cache), then driven offline through
``model_server.ModelServer`` with ``record_hook.py`` wired for every event the
client may send (except WorktreeCreate/Remove, whose hooks replace the client's
own behaviour). The scenarios are scripted so that the same tool calls come out
of every version:

* ``tidy notes``: Read, Edit, a failing Bash (``exit 3``), a TodoWrite the run
  does not allow, Write into ``memory/``, Glob, Grep, then ``Finished.``;
* ``first task``: three Bash echoes, then ``/compact keep the goal`` and
  ``continue`` on ``--resume``, then a ``--fork-session``;
* ``look around``: a subagent (Agent, or Task on older clients) that runs one
  Bash call, a WebFetch the run does not allow (PermissionRequest); then
  ``fail please``, a session the model server answers with HTTP 500, retries
  off (StopFailure; the client does not always wait for that hook, so up to
  three tries).

One file per event and variant (tool name, SessionStart source, compaction
trigger, notification type), the first payload of each kind wins; the
transcripts of the first two sessions are kept as ``transcript-sample.jsonl``
and ``transcript-compacted-sample.jsonl``. Paths are rewritten as if the
session ran as ``/home/dev`` in ``/home/dev/acme``; the script refuses to write
a file that still names the capture's temporary directory or this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import claude_client  # noqa: E402
from model_server import ModelServer, api_error, text, tool_use  # noqa: E402

REPO = HERE.parents[1]
FIXTURES = REPO / "tests" / "fixtures"
RECORDER = HERE / "record_hook.py"
# Every event a command hook may observe without changing what the client does.
EVENTS = (
    "SessionStart", "SessionEnd", "Setup", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse",
    "PostToolUse", "PostToolUseFailure", "PostToolBatch", "PermissionRequest", "PermissionDenied",
    "Notification", "Stop", "StopFailure", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
    "InstructionsLoaded", "ConfigChange", "CwdChanged", "FileChanged", "DirectoryAdded", "TaskCreated",
    "TaskCompleted", "PreModelSwitch", "PostModelSwitch", "PreSkillShellCommand", "MessageDisplay",
    "Elicitation", "ElicitationResult", "TeammateIdle",
)
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "PermissionDenied")
VARIANT_KEY = {"SessionStart": "source", "PreCompact": "trigger", "PostCompact": "trigger",
               "Notification": "notification_type"}
# Events every client we test sends in these scenarios.
EXPECTED = {"SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
            "Stop", "StopFailure", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact"}
FAKE_HOME = "/home/dev"
ALLOWED = "Bash Write Edit Read Glob Grep"
MEMORY_FILE = "memory/2026-11-21-notes.md"
RUN_TIMEOUT_S = 120
MCP_SERVER = HERE / "mcp_asker.py"
WATCHED = "watched.txt"
# A custom command and a skill, each with an inline shell command (`!`...``): the client expands
# them before the model sees the prompt (UserPromptExpansion, PreSkillShellCommand).
COMMAND_MD = "---\ndescription: Say hello\nallowed-tools: Bash(echo:*)\n---\nHello from !`echo command-shell`\n"
SKILL_MD = ("---\nname: greet\ndescription: Greets the person.\nallowed-tools: Bash(echo:*)\n---\n"
            "Greeting: !`echo skill-shell`\n")


def fixture_name(payload: dict[str, Any]) -> str:
    """``<Event>[-<variant>].json``: the variant is the tool, source, trigger or notification type."""
    event = str(payload.get("hook_event_name") or "unknown")
    key = "tool_name" if event in TOOL_EVENTS else VARIANT_KEY.get(event)
    variant = payload.get(key) if key else None
    if isinstance(variant, str) and re.fullmatch(r"[A-Za-z0-9_.:-]{1,40}", variant):
        return f"{event}-{variant}.json"
    return f"{event}.json"


class Sanitizer:
    """Rewrites the capture's temporary paths as ``/home/dev/...``; checks nothing local is left."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        # Claude Code names a project's directory after its path, every non-alphanumeric as '-'.
        self.dashed = re.sub(r"[^A-Za-z0-9]", "-", self.root)
        self.forbidden = [self.root, self.dashed, str(REPO), str(Path.home()), sys.executable]

    def __call__(self, text_in: str) -> str:
        out = text_in.replace(self.dashed, "").replace(self.root, "")
        for needle in self.forbidden:
            if needle and needle != "/" and needle in out:
                raise SystemExit(f"refusing to write a fixture naming {needle!r}")
        return out


class Capture:
    """One version's world: a fake home under a temp dir, the model server and the recorder."""

    def __init__(self, claude: Path, root: Path) -> None:
        self.claude = claude
        self.root = root
        self.home = root / FAKE_HOME.lstrip("/")
        self.workspace = self.home / "acme"
        self.log = root / "capture.jsonl"
        self.server = ModelServer().start()
        (self.workspace / "memory").mkdir(parents=True)
        (root / "tmp").mkdir()
        (self.workspace / "notes.txt").write_text("hello world\n")
        (self.workspace / WATCHED).write_text("v1\n")
        (self.workspace / ".claude" / "commands").mkdir(parents=True)
        (self.workspace / ".claude" / "commands" / "hello.md").write_text(COMMAND_MD)
        (self.workspace / ".claude" / "skills" / "greet").mkdir(parents=True)
        (self.workspace / ".claude" / "skills" / "greet" / "SKILL.md").write_text(SKILL_MD)
        self.mcp_config = root / "mcp.json"
        self.mcp_config.write_text(json.dumps({"mcpServers": {"asker": {
            "type": "stdio", "command": sys.executable, "args": [str(MCP_SERVER)]}}}))
        bin_dir = self.home / "bin"
        bin_dir.mkdir()
        recorder = bin_dir / "record-hook"
        recorder.write_text(f"#!{sys.executable}\n" + RECORDER.read_text())
        recorder.chmod(0o755)
        hooks = {event: [{"hooks": [{"type": "command", "command": str(recorder), "timeout": 10}]}]
                 for event in EVENTS}
        self.settings = root / "settings.json"
        self.settings.write_text(json.dumps({"hooks": hooks}, indent=1))

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return (extra or {}) | {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(self.home),
            "TMPDIR": str(self.root / "tmp"), "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": self.server.url,
            "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "NO_PROXY": "127.0.0.1,localhost", "AGENT_HOOKS_CAPTURE_LOG": str(self.log),
            # The recorder asks SessionStart to watch this file (watchPaths), for FileChanged.
            "AGENT_HOOKS_CAPTURE_WATCH": str(self.workspace / WATCHED),
        }

    def run(self, prompt: str, turns: list[Any], resume: str | None = None, allowed: str = ALLOWED,
            extra: list[str] | None = None, env: dict[str, str] | None = None,
            required: bool = True) -> dict[str, Any]:
        self.server.set_script(turns)
        cmd = [str(self.claude), "-p", prompt, "--settings", str(self.settings), "--allowedTools", allowed,
               "--output-format", "json", *(["--resume", resume] if resume else []), *(extra or [])]
        proc = subprocess.run(cmd, cwd=self.workspace, env=self.env(env), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
        try:
            result = json.loads(proc.stdout)
        except ValueError:
            result = {}
        print(f"  {prompt!r}: exit {proc.returncode}, session {result.get('session_id')}, "
              f"{len(self.payloads())} payloads so far", file=sys.stderr)
        if not result.get("session_id") and required:
            raise SystemExit(f"claude gave no session id for {prompt!r}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        return result

    def payloads(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def transcript(self, session_id: str) -> Path:
        dashed = re.sub(r"[^A-Za-z0-9]", "-", str(self.workspace))
        return self.home / ".claude" / "projects" / dashed / f"{session_id}.jsonl"

    def scenarios(self) -> tuple[str, str]:
        """Run every scenario; returns the ids of the tidy and the compacted sessions."""
        ws = str(self.workspace)
        todos = [{"content": "write tests", "status": "in_progress", "activeForm": "Writing tests"},
                 {"content": "ship", "status": "pending", "activeForm": "Shipping"}]
        tidy = self.run("tidy notes", [
            [tool_use("Read", {"file_path": f"{ws}/notes.txt"}, id="toolu_0001")],
            [tool_use("Edit", {"file_path": f"{ws}/notes.txt", "old_string": "hello", "new_string": "goodbye",
                               "replace_all": False}, id="toolu_0002")],
            [tool_use("Bash", {"command": "exit 3", "description": "fail"}, id="toolu_0003")],
            [tool_use("TodoWrite", {"todos": todos}, id="toolu_0004")],
            [tool_use("Write", {"file_path": f"{ws}/{MEMORY_FILE}",
                                "content": "# Memory\nThe deploy key lives in vault.\n"}, id="toolu_0005")],
            [tool_use("Glob", {"pattern": "**/*.md"}, id="toolu_0006")],
            [tool_use("Grep", {"pattern": "deploy", "path": ws}, id="toolu_0007")],
            [text("Finished.")],
        ])["session_id"]
        first = self.run("first task", [
            [tool_use("Bash", {"command": f"echo {c}", "description": c}, id=f"toolu_000{i}")]
            for i, c in enumerate("abc", 1)
        ] + [[text("ok first")]])["session_id"]
        self.run("/compact keep the goal", [], resume=first)
        self.run("continue", [[text("after compact")]], resume=first)
        self.run("a fork", [[text("forked")]], resume=first, extra=["--fork-session"])

        def subagent(body: dict[str, Any]) -> list[dict[str, Any]]:
            tools = {t.get("name"): t for t in body.get("tools") or []}
            name = "Agent" if "Agent" in tools else "Task"
            args: dict[str, Any] = {"description": "look around", "prompt": "Run echo sub and report.",
                                    "subagent_type": "general-purpose"}
            # Newer clients run subagents in the background unless told not to; the script needs one order.
            if "run_in_background" in ((tools[name].get("input_schema") or {}).get("properties") or {}):
                args["run_in_background"] = False
            return [tool_use(name, args, id="toolu_0010")]

        self.run("look around", [
            subagent,
            [tool_use("Bash", {"command": "echo sub", "description": "sub"}, id="toolu_0011")],
            [text("subagent done")],
            [tool_use("WebFetch", {"url": "http://127.0.0.1:9/", "prompt": "read it"}, id="toolu_0012")],
            [text("Done looking.")],
        ])["session_id"]
        # Newer events, each tried once; what a run cannot trigger offline is reported, not fatal.
        self.run("/hello", [[text("hello back")]], required=False)
        self.run("greet me", [[tool_use("Skill", {"skill": "greet"}, id="toolu_0020")], [text("greeted")]],
                 required=False)
        self.run("touch the watched file", [
            [tool_use("Bash", {"command": f"echo v2 >> {ws}/{WATCHED} && sleep 3", "description": "touch"},
                      id="toolu_0030")],
            [text("touched")]], required=False)
        self.run("ask the person", [[tool_use("mcp__asker__ask", {}, id="toolu_0040")], [text("asked")]],
                 allowed=ALLOWED + " mcp__asker__ask", extra=["--mcp-config", str(self.mcp_config)],
                 required=False)
        self.run("/model haiku", [], required=False)
        # A 500 with retries off: the turn ends on the API error (StopFailure, error "server_error").
        # The client does not always wait for StopFailure hooks before it exits: try a few times.
        for _ in range(3):
            self.run("fail please", [[api_error(500, "api_error", "scripted failure", sticky=True)]],
                     env={"CLAUDE_CODE_MAX_RETRIES": "0"})
            if any(p.get("hook_event_name") == "StopFailure" for p in self.payloads()):
                break
        return tidy, first

    def close(self) -> None:
        self.server.stop()


def capture(ver: str, out_root: Path = FIXTURES, keep: bool = False) -> Path:
    """Install ``ver``, run the scenarios, write its fixture directory; returns the directory."""
    ver = claude_client.resolve(ver)
    claude = claude_client.ensure_client(ver)
    root = Path(tempfile.mkdtemp(prefix="agent-hooks-capture-"))
    cap = Capture(claude, root)
    try:
        print(f"Claude Code {ver}:", file=sys.stderr)
        tidy, compacted = cap.scenarios()
        clean = Sanitizer(root)
        chosen: dict[str, dict[str, Any]] = {}
        for payload in cap.payloads():
            chosen.setdefault(fixture_name(payload), payload)
        out = out_root / f"claude-code-{ver}"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for name, payload in sorted(chosen.items()):
            (out / name).write_text(clean(json.dumps(payload, indent=2, ensure_ascii=False)) + "\n")
        for sid, name in ((tidy, "transcript-sample.jsonl"), (compacted, "transcript-compacted-sample.jsonl")):
            (out / name).write_text(clean(cap.transcript(sid).read_text()))
        missing = sorted(EXPECTED - {p.get("hook_event_name") for p in chosen.values()})
        if missing:
            # Seen once: a StopFailure hook that lost the race with the client's exit. Run it again.
            print(f"  warning: no {', '.join(missing)} payload this time", file=sys.stderr)
        wanted = set(EVENTS) - {p.get("hook_event_name") for p in chosen.values()}
        print(f"  not sent in these scenarios: {', '.join(sorted(wanted)) or 'none'}", file=sys.stderr)
        print(f"  wrote {len(chosen)} payloads and 2 transcripts to {out}: "
              f"{', '.join(sorted(chosen))}", file=sys.stderr)
        return out
    finally:
        cap.close()
        if keep:
            print(f"  kept {root} (raw log: {cap.log})", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=[claude_client.DEFAULT_VERSION],
                        help="client versions to capture ('latest' = newest published)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="fixtures root (default: tests/fixtures)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home and the raw log")
    args = parser.parse_args(argv)
    for ver in args.versions:
        print(shlex.join(["captured", str(capture(ver, args.out, args.keep))]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
