"""User handlers, unit level: HOOK.md parsing, discovery and precedence, path safety, eligibility,
the compiled registry, matchers and the context budget."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_hooks import config as config_mod
from agent_hooks.handlers import discovery, eligibility, registry
from agent_hooks.handlers.discovery import EXTRA, MANAGED, WORKSPACE, Source
from agent_hooks.handlers.run import clip_contexts, validate

from support.handlers import old_mtimes, write_handler


def meta_of(text: str) -> tuple[dict, list[str], list[str]]:
    front, _ = discovery.split_frontmatter(text)
    return discovery.parse_meta(front, "dir-name")


# -- HOOK.md ------------------------------------------------------------------------------------

def test_frontmatter_is_parsed_and_normalised() -> None:
    meta, errors, warnings = meta_of(
        "---\nname: policy\ndescription: d\nevents: PreToolUse\nmatcher: Bash|Write\npriority: 5\n"
        "timeout_ms: 250\nrequires:\n  bins: [git]\n  anyBins: [npm, yarn]\n  env: TOKEN\nos: linux\n"
        "agents: [w1]\nroles: worker\n---\n# doc\n")
    assert errors == [] and warnings == []
    assert meta["events"] == ["PreToolUse"] and meta["matcher"] == "Bash|Write" and meta["priority"] == 5
    assert meta["requires"] == {"bins": ["git"], "anyBins": ["npm", "yarn"], "env": ["TOKEN"], "config": []}
    assert meta["os"] == ["linux"] and meta["roles"] == ["worker"] and meta["enabled"] is True


def test_unknown_keys_warn_and_mistakes_are_errors() -> None:
    _, errors, warnings = meta_of("---\nname: x\ndescription: d\nevents: [PreToolUse]\ncolour: red\n---\n")
    assert errors == [] and warnings == ["unknown key 'colour' in HOOK.md (ignored)"]
    _, errors, _ = meta_of("---\nname: x\nevents: []\npriority: high\nenabled: maybe\n---\n")
    assert "no events: list the Claude Code events it handles, e.g. events: [PreToolUse]" in errors
    assert "priority must be an integer, got 'high'" in errors
    assert "enabled must be true or false, got 'maybe'" in errors
    _, errors, warnings = meta_of("---\nevents: [PreToolUse, OnFire]\napi_version: 9\nmatcher: '('\n---\n")
    assert any("OnFire" in w for w in warnings) and any("no name in HOOK.md" in w for w in warnings)
    assert any("handler API version 9" in e for e in errors) and any("not a valid regex" in e for e in errors)
    assert meta_of("no frontmatter at all")[1] == [
        "HOOK.md has no YAML frontmatter (a first line '---', then the keys, then '---')"]
    assert "not valid YAML" in meta_of("---\nname: [unclosed\n---\n")[1][0]


def test_frontmatter_nested_past_libyamls_limit_is_refused_by_its_parser() -> None:
    """libyaml (PyYAML's C loader, in its wheels) stops at 1,000 levels in a millisecond; the
    pure-Python one recursed for most of a second, in every hook, before giving up."""
    import yaml

    if not hasattr(yaml, "CSafeLoader"):
        pytest.skip("this PyYAML was built without libyaml")
    errors = meta_of("---\nhomepage: " + "[" * 3000 + "]" * 3000 + "\n---\n")[1]
    assert len(errors) == 1 and "not valid YAML" in errors[0] and "maximum nesting depth" in errors[0], errors


# -- discovery, precedence, path safety -----------------------------------------------------------

def test_a_folder_others_can_write_to_runs_none_of_its_handlers(tmp_path: Path) -> None:
    """Its handlers may each look fine: anyone could have put them there, or add one tomorrow."""
    managed = tmp_path / "managed"
    write_handler(managed, "planted")
    srcs = [Source(MANAGED, str(managed))]
    state = str(tmp_path / "state")
    assert registry.compile_sources(srcs, state)[0][0]["errors"] == []
    managed.chmod(0o777)  # after the registry was compiled: the chmod alone must show
    found, rebuilt = registry.compile_sources(srcs, state)
    assert rebuilt and "writable by anyone" in found[0]["errors"][0] and "handler folder" in found[0]["errors"][0]
    managed.chmod(0o700)
    assert registry.compile_sources(srcs, state)[0][0]["errors"] == []


def test_a_handler_another_user_owns_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another uid needs root")
    managed = tmp_path / "managed"
    theirs = write_handler(managed, "theirs")
    os.chown(theirs / "handler.py", 65534, 65534)  # nobody
    errors = discovery.discover([Source(MANAGED, str(managed))])[0][0]["errors"]
    assert "belongs to another user (uid 65534)" in errors[0]


def test_precedence_later_sources_win_and_untrusted_workspaces_take_nothing(tmp_path: Path) -> None:
    extra, managed, ws = tmp_path / "extra", tmp_path / "managed", tmp_path / "ws" / ".agent-hooks" / "hooks"
    for parent in (extra, managed, ws):
        write_handler(parent, "policy", priority=1)
    write_handler(extra, "only-extra")
    srcs = [Source(EXTRA, str(extra)), Source(MANAGED, str(managed)), Source(WORKSPACE, str(ws), trusted=True)]
    found, stamps = discovery.discover(srcs)
    by = {h["name"]: h for h in found}
    assert by["policy"]["source"] == WORKSPACE and len(by["policy"]["shadows"]) == 2
    assert by["only-extra"]["source"] == EXTRA
    assert str(managed / "policy" / "HOOK.md") in stamps
    # An untrusted workspace cannot replace (and so switch off) the operator's handler.
    srcs[2] = Source(WORKSPACE, str(ws), trusted=False)
    by = {h["name"]: h for h in discovery.discover(srcs)[0]}
    assert by["policy"]["source"] == MANAGED
    assert any("untrusted workspace handler" in w for w in by["policy"]["warnings"])


def test_symlinks_leading_out_and_writable_files_are_refused(tmp_path: Path) -> None:
    outside = write_handler(tmp_path / "elsewhere", "evil")
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "evil").symlink_to(outside)
    inner = write_handler(managed, "sneaky")
    (inner / "handler.py").unlink()
    (inner / "handler.py").symlink_to(outside / "handler.py")
    shared = write_handler(managed, "shared")
    (shared / "handler.py").chmod(0o666)
    ok = write_handler(managed, "fine")
    (managed / "alias").symlink_to(ok)  # a symlink that stays inside is fine
    by = {h["dir"].split("/")[-1] if h["errors"] else h["name"]: h for h in
          discovery.discover([Source(MANAGED, str(managed))])[0]}
    errors = {h["name"]: h["errors"] for h in discovery.discover([Source(MANAGED, str(managed))])[0]}
    assert "outside its source" in errors["evil"][0]
    assert "handler.py resolves to" in errors["sneaky"][0]
    assert "writable by anyone" in errors["shared"][0]
    assert errors["fine"] == []
    assert by  # (built without error)


def test_a_handler_dir_needs_exactly_one_entry(tmp_path: Path) -> None:
    d = write_handler(tmp_path, "both")
    (d / "handler").write_text("#!/bin/sh\n")
    (d / "handler").chmod(0o700)
    none = write_handler(tmp_path, "none")
    (none / "handler.py").unlink()
    noexec = write_handler(tmp_path, "noexec", executable="#!/bin/sh\n")
    (noexec / "handler").chmod(0o600)
    errors = {h["name"]: h["errors"] for h in discovery.discover([Source(MANAGED, str(tmp_path))])[0]}
    assert errors["both"] == ["both handler.py and handler: keep one"]
    assert errors["none"] == ["no handler.py (in-process) or executable handler"]
    assert "not executable" in errors["noexec"][0]


def test_an_extra_dir_may_be_a_handler_or_a_pack(tmp_path: Path) -> None:
    single = write_handler(tmp_path, "single")
    pack = tmp_path / "pack"
    write_handler(pack / "handlers", "a")
    write_handler(pack / "handlers", "b")
    write_handler(pack, "unlisted")
    (pack / "hooks-pack.json").write_text('{"name": "team", "handlers": ["handlers/a", "handlers/b"]}')
    names = [h["name"] for h in discovery.discover([Source(EXTRA, str(single)), Source(EXTRA, str(pack))])[0]]
    assert names == ["a", "b", "single"]
    (pack / "hooks-pack.json").write_text('{"handlers": ["../single"]}')
    (broken,) = discovery.discover([Source(EXTRA, str(pack))])[0]
    assert "outside its source" in broken["errors"][0]


# -- eligibility ----------------------------------------------------------------------------------

def record(**over: object) -> dict:
    base = {"name": "h", "source": MANAGED, "trusted": True, "errors": [], "enabled": True, "always": False,
            "os": [], "requires": {"bins": [], "anyBins": [], "env": [], "config": []}, "agents": [], "roles": []}
    base.update(over)
    return base


def judge(h: dict, env: dict | None = None, cfg: dict | None = None, agent: str = "a1", role: str = "worker",
          bins: tuple[str, ...] = ("git",)) -> tuple[str, list[str]]:
    return eligibility.evaluate(h, "linux", env or {}, cfg or config_mod.defaults(), agent, role,
                                has_bin=lambda b: b in bins)


def test_each_requirement_fails_with_its_own_reason() -> None:
    assert judge(record()) == ("ready", [])
    assert judge(record(os=["darwin"]))[1] == ["os is linux, the handler needs one of darwin"]
    req = {"bins": ["git", "docker"], "anyBins": ["npm", "yarn"], "env": ["TOKEN"], "config": ["memory.dirs",
                                                                                          "summary.summarizer_command"]}
    status, reasons = judge(record(requires=req))
    assert status == "ineligible" and reasons == [
        "not on PATH: docker", "none of these on PATH: npm, yarn", "environment variable not set: TOKEN",
        "config not set: summary.summarizer_command"]
    assert judge(record(requires=req), env={"TOKEN": "t"}, bins=("git", "docker", "yarn"),
                 cfg={**config_mod.defaults(), "summary": {"summarizer_command": ["x"]}}) == ("ready", [])
    assert judge(record(requires=req, os=["win32"], always=True)) == ("ready", [])  # always skips requirements
    assert judge(record(agents=["a2"], roles=["lead"]))[1] == ["for agents a2, not a1", "for roles lead, not worker"]
    assert judge(record(agents=["a2"], always=True))[0] == "ineligible"  # ...but not whom it is for


def test_switches_config_beats_hook_md_and_workspaces_need_the_operator() -> None:
    cfg = config_mod.defaults()
    assert judge(record(enabled=False))[1][0].startswith("off by default (HOOK.md enabled: false)")
    cfg["handlers"]["entries"] = {"h": {"enabled": True}}
    assert judge(record(enabled=False), cfg=cfg) == ("ready", [])
    cfg["handlers"]["entries"] = {"h": {"enabled": False}}
    assert judge(record(), cfg=cfg)[0] == "disabled"
    assert "until the operator trusts this workspace" in judge(record(source=WORKSPACE, trusted=False))[1][0]
    assert "until the operator enables it" in judge(record(source=WORKSPACE))[1][0]
    cfg["handlers"]["entries"] = {"h": {"enabled": True}}
    assert judge(record(source=WORKSPACE), cfg=cfg) == ("ready", [])
    assert judge(record(errors=["no HOOK.md"])) == ("broken", ["no HOOK.md"])


def test_which_finds_executables_on_the_given_path(tmp_path: Path) -> None:
    exe = tmp_path / "tool"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o700)
    (tmp_path / "plain").write_text("")
    assert eligibility.which("tool", f"/nonexistent:{tmp_path}")
    assert not eligibility.which("plain", str(tmp_path)) and not eligibility.which("tool", "/nonexistent")


# -- registry -------------------------------------------------------------------------------------

@pytest.fixture
def reg(tmp_path: Path) -> tuple[dict, str, str]:
    cfg = config_mod.defaults()
    config_dir, state_dir = str(tmp_path / "cfg"), str(tmp_path / "state")
    return cfg, config_dir, state_dir


def test_registry_compiles_once_and_rebuilds_on_change(tmp_path: Path, reg: tuple[dict, str, str]) -> None:
    cfg, config_dir, state_dir = reg
    managed = Path(config_dir) / "hooks"
    d = write_handler(managed, "p", priority=7)
    old_mtimes(managed)
    srcs = registry.current_sources(cfg, config_dir, None, hot=True)
    assert [s.kind for s in srcs] == [MANAGED]  # bundled handlers are all off: not even read
    first, rebuilt = registry.compile_sources(srcs, state_dir)
    assert rebuilt and first[0]["priority"] == 7
    assert registry.compile_sources(srcs, state_dir) == (first, False)
    (d / "HOOK.md").write_text((d / "HOOK.md").read_text().replace("priority: 7", "priority: 3"))
    again, rebuilt = registry.compile_sources(srcs, state_dir)
    assert rebuilt and again[0]["priority"] == 3
    write_handler(managed, "q")
    names = [h["name"] for h in registry.compile_sources(srcs, state_dir)[0]]
    assert names == ["p", "q"]
    cache = list((Path(state_dir) / "cache").iterdir())
    assert len(cache) == 1 and oct(cache[0].stat().st_mode & 0o777) == "0o600"


def test_due_filters_by_event_matcher_and_eligibility_in_priority_order(reg: tuple[dict, str, str]) -> None:
    cfg, config_dir, state_dir = reg
    managed = Path(config_dir) / "hooks"
    write_handler(managed, "late", priority=200)
    write_handler(managed, "early", priority=1, matcher="Bash|Write")
    write_handler(managed, "tie-b", priority=50)
    write_handler(managed, "tie-a", priority=50)
    write_handler(managed, "edits", matcher="Edit|MultiEdit")
    write_handler(managed, "regex", matcher="mcp__.*")
    write_handler(managed, "stop-only", events=["Stop"])
    write_handler(managed, "off", enabled=False)
    write_handler(managed, "needs-env", requires={"env": ["NOPE_NOT_SET"]})
    write_handler(managed, "for-leads", roles=["lead"])
    write_handler(managed, "always-for-leads", always=True, roles=["lead"])  # always skips requirements only
    write_handler(managed, "always", always=True, priority=2, requires={"bins": ["no-such-binary-here"]})
    due = registry.due(cfg, config_dir, state_dir, {}, "/tmp", "PreToolUse", "Bash")
    assert [h["name"] for h in due] == ["early", "always", "tie-a", "tie-b", "late"]
    lead = registry.due(cfg, config_dir, state_dir, {"AGENT_HOOKS_ROLE": "lead", "NOPE_NOT_SET": "1"}, "/tmp",
                        "PreToolUse", "Bash")
    assert [h["name"] for h in lead] == ["early", "always", "tie-a", "tie-b", "always-for-leads", "for-leads",
                                         "needs-env", "late"]
    assert [h["name"] for h in registry.due(cfg, config_dir, state_dir, {}, "/tmp", "PreToolUse", "mcp__gh__x")] == \
        ["always", "tie-a", "tie-b", "regex", "late"]
    assert [h["name"] for h in registry.due(cfg, config_dir, state_dir, {}, "/tmp", "Stop")] == ["stop-only"]
    cfg["handlers"]["enabled"] = False
    assert registry.due(cfg, config_dir, state_dir, {}, "/tmp", "Stop") == []


def test_none_due_is_told_from_the_compiled_registry_without_rebuilding_it(reg: tuple[dict, str, str]) -> None:
    """The server's event loop asks this before it answers a tool call itself."""
    cfg, config_dir, state_dir = reg
    managed = Path(config_dir) / "hooks"

    def none_due(event: str, tool: str = "Bash") -> bool:
        return registry.none_due(cfg, config_dir, state_dir, {}, "/tmp", event, tool)

    assert none_due("PreToolUse")  # no handlers at all
    write_handler(managed, "on-stop", events=["Stop"])
    write_handler(managed, "reads", matcher="Read")
    write_handler(managed, "off", enabled=False)
    old_mtimes(managed)
    assert not none_due("PreToolUse")  # nothing compiled yet: only a rebuild could tell
    registry.due(cfg, config_dir, state_dir, {}, "/tmp", "PreToolUse", "Bash")  # compiles
    assert none_due("PreToolUse") and none_due("PostToolUse")
    assert not none_due("PreToolUse", "Read") and not none_due("Stop")
    cfg["handlers"]["entries"] = {"off": {"enabled": True}}
    assert not none_due("PreToolUse")  # switched on in the config
    cfg["handlers"]["entries"] = {}
    (managed / "reads" / "HOOK.md").write_text((managed / "reads" / "HOOK.md").read_text().replace("Read", "Bash"))
    assert not none_due("PreToolUse")  # changed since the compile: not rebuilt here
    cache = next((Path(state_dir) / "cache").glob("handlers-*.bin")).read_bytes()
    compiled = marshal.loads(cache[len(registry.CACHE_MAGIC):])
    assert {h["name"]: h["matcher"] for h in compiled["handlers"]}["reads"] == "Read"


def test_no_handlers_means_no_cache_and_no_yaml(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom agent_hooks import config\nfrom agent_hooks.handlers import registry\n"
        f"cfg = config.defaults()\nprint(registry.due(cfg, {str(tmp_path / 'cfg')!r}, {str(tmp_path / 's')!r}, {{}},"
        " '/tmp', 'PreToolUse', 'Bash'), 'yaml' in sys.modules, 'agent_hooks.handlers.run' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "False", "False"]
    assert not (tmp_path / "s").exists()


def test_a_steady_state_call_reads_the_cache_without_yaml(tmp_path: Path) -> None:
    write_handler(tmp_path / "cfg" / "hooks", "p")
    old_mtimes(tmp_path / "cfg")
    code = (
        "import sys\nfrom agent_hooks import config\nfrom agent_hooks.handlers import registry\n"
        f"cfg = config.defaults()\ndue = registry.due(cfg, {str(tmp_path / 'cfg')!r}, {str(tmp_path / 's')!r}, {{}},"
        " '/tmp', 'PreToolUse', 'Bash')\nprint([h['name'] for h in due], 'yaml' in sys.modules,"
        " 'agent_hooks.handlers.eligibility' in sys.modules)"
    )
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # A handler with nothing to check needs only its switch: eligibility.py is not even imported.
    assert first.split() == ["['p']", "True", "False"] and second.split() == ["['p']", "False", "False"]


# -- matchers, results, budget ----------------------------------------------------------------------

def test_matchers() -> None:
    assert registry.matches(None, "Bash") and registry.matches("*", "Read")
    assert registry.matches("Write|Edit", "Edit") and not registry.matches("Edit", "NotebookEdit")
    assert registry.matches("Write, Edit", "Write")
    assert registry.matches("mcp__github__.*", "mcp__github__pr") and not registry.matches("Bash.", "xBashy")


def test_results_are_validated() -> None:
    assert validate(None, "Stop") == (None, None)
    assert validate({"decision": "deny", "reason": "r"}, "PreToolUse")[0]["decision"] == "deny"
    assert validate(["deny"], "PreToolUse")[1] == "returned list; expected a dict (or None)"
    assert validate({"decision": "nope"}, "PreToolUse")[1] == "decision 'nope' is not allow, warn, deny or block"
    assert validate({"context": 3}, "PreToolUse")[1] == "context must be a string"
    assert validate({"updated_input": "x"}, "PreToolUse")[1] == "updated_input must be an object"


def test_contexts_are_joined_within_the_budget() -> None:
    assert clip_contexts(["a" * 10, "b" * 10], 100) == ["a" * 10, "b" * 10]
    out = clip_contexts(["a" * 60, "b" * 60, "c"], 100)
    assert out[0] == "a" * 60 and out[1].endswith("[… cut]") and len(out[1]) == 40
    assert out[2] == "[1 more handler context(s) cut: over the budget]"


def test_bundled_handlers_are_all_off_by_default_and_valid() -> None:
    found, _ = discovery.discover([Source(discovery.BUNDLED, discovery.BUNDLED_DIR)])
    assert sorted(h["name"] for h in found) == ["boot-md", "bootstrap-extra-files", "command-logger",
                                                "session-memory"]
    for h in found:
        assert h["errors"] == [] and h["warnings"] == [] and h["enabled"] is False and h["kind"] == "python"
    assert os.path.isdir(discovery.BUNDLED_DIR)


# -- a long-lived process (the http transport) ---------------------------------------------------

def test_a_long_lived_process_loads_once_and_reloads_on_change(hooks_home: Path) -> None:
    from agent_hooks.handlers import hook, run
    from agent_hooks.paths import Paths
    from agent_hooks.payload import validate
    from agent_hooks.runner import Context

    env = dict(os.environ)
    paths = Paths(env)
    d = write_handler(Path(paths.config_dir) / "hooks", "ctx", code="def handle(event):\n    return {'context': 'v1'}\n")
    old_mtimes(Path(paths.config_dir))

    def call(n: int) -> list[str]:
        raw = {"session_id": "s-long", "hook_event_name": "PreToolUse", "cwd": "/tmp", "tool_name": "Bash",
               "tool_input": {"command": "ls"}, "tool_use_id": f"t{n}"}
        cfg, _ = config_mod.load_lenient(paths, env)
        ctx = Context(validate(raw, "PreToolUse"), cfg, paths, env)  # output.STDOUT_IS_PROTOCOL stays False, as in a server
        try:
            merged = hook.run_due(ctx, "PreToolUse")
            return merged.contexts if merged else []
        finally:
            ctx.close()

    assert call(1) == ["v1"]
    loaded = run._MODULES[str(d / "handler.py")]
    assert call(2) == ["v1"] and run._MODULES[str(d / "handler.py")] is loaded  # not compiled again
    (d / "handler.py").write_text("def handle(event):\n    return {'context': 'v2, a longer answer'}\n")
    assert call(3) == ["v2, a longer answer"]
    write_handler(Path(paths.config_dir) / "hooks", "another", code="def handle(event):\n    return {'context': 'new'}\n")
    assert call(4) == ["new", "v2, a longer answer"]  # same priority: by name
    import shutil

    shutil.rmtree(d)
    assert call(5) == ["new"]


def test_a_long_lived_process_reuses_its_handler_threads(hooks_home: Path, tmp_path: Path) -> None:
    """The server starts no thread per call; a worker abandoned to a hung handler is not handed work."""
    from agent_hooks.handlers import hook
    from agent_hooks.paths import Paths
    from agent_hooks.payload import validate
    from agent_hooks.runner import Context

    env = dict(os.environ)
    paths = Paths(env)
    flag, hung_on = tmp_path / "hang", tmp_path / "hung-on"
    managed = Path(paths.config_dir) / "hooks"
    write_handler(managed, "who", priority=2,
                  code="import _thread\ndef handle(event):\n    return {'context': str(_thread.get_native_id())}\n")
    write_handler(managed, "slow", priority=1, timeout_ms=150, code=(
        "import _thread, os, time\ndef handle(event):\n"
        f"    if os.path.exists({str(flag)!r}):\n"
        f"        open({str(hung_on)!r}, 'w').write(str(_thread.get_native_id()))\n"
        "        time.sleep(0.6)\n"))
    old_mtimes(Path(paths.config_dir))

    def call(n: int) -> tuple[list[str], list[str]]:
        raw = {"session_id": "s-threads", "hook_event_name": "PreToolUse", "cwd": "/tmp", "tool_name": "Bash",
               "tool_input": {"command": "ls"}, "tool_use_id": f"t{n}"}
        cfg, _ = config_mod.load_lenient(paths, env)
        ctx = Context(validate(raw, "PreToolUse"), cfg, paths, env)
        try:
            merged = hook.run_due(ctx, "PreToolUse")
            assert merged is not None
            return merged.contexts, merged.failed
        finally:
            ctx.close()

    # Native thread ids are not reused at once (a pthread id is, with the cached stack).
    threads = {call(n)[0][0] for n in range(20)}
    assert len(threads) <= 2, threads  # the last call's worker may not be parked yet: then another one
    flag.touch()
    contexts, failed = call(20)
    assert failed == ["slow"] and contexts[0] != hung_on.read_text()  # the rest ran on another thread
    flag.unlink()
    later, failed = call(21)
    assert failed == [] and later[0] != hung_on.read_text()  # its worker is still asleep in it: not used
    time.sleep(0.8)  # the hung handler returns; its worker parks again
    assert all(call(n)[1] == [] for n in range(23, 30))
    assert sys.stdout.owners == {}  # no worker stays registered: a later thread may get its id
