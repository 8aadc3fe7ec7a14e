"""What a host decides about a launch, without a server: the request's shape, the host's roots (symlinks
resolved), its modes and client, the session's argument list and environment (center/launch.py)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_hooks import config as config_mod
from agent_hooks.center import checks, launch


def cfg(roots: list[Any] | None = None, claude: str = "/bin/true", modes: list[str] | None = None) -> dict[str, Any]:
    c = config_mod.defaults()
    c["launch"].update(roots=roots or [], claude=claude)
    if modes is not None:
        c["launch"]["permission_modes"] = modes
    return c


def test_a_request_is_checked_for_shape_and_named_for_tmux() -> None:
    item = launch.parse({"cwd": "/w/../w/repo/", "prompt": "-p go", "label": "Fix: the bug.v2", "task_id": "T-1/a"})
    assert uuid.UUID(item.session_id) and item.cwd == "/w/repo"
    assert item.tmux == "agent-Fix-the-bug-v2"  # tmux gives "." and ":" a meaning
    assert launch.parse({"cwd": "/w", "prompt": "p", "label": "agent-x"}).tmux == "agent-x"
    assert launch.parse({"cwd": "/w", "prompt": "p", "label": "!!!"}, "00000000-0000-4000-8000-000000000001").tmux \
        == "agent-00000000"
    for doc, text in [([], "JSON object"), ({"prompt": "p"}, '"cwd" is required'), ({"cwd": "w", "prompt": "p"}, "absolute"),
                      ({"cwd": "/w\x00", "prompt": "p"}, "NUL"), ({"cwd": "/w", "prompt": " "}, '"prompt" is required'),
                      ({"cwd": "/w", "prompt": "p\x00"}, "NUL"), ({"cwd": "/w", "prompt": "x" * 20001}, "at most 20000"),
                      ({"cwd": "/w", "prompt": "p", "permission_mode": "yolo"}, "must be one of"),
                      ({"cwd": "/w", "prompt": "p", "agent": "a b"}, "agent name"),
                      ({"cwd": "/w", "prompt": "p", "label": "a\x1b[2J"}, "control characters"),
                      ({"cwd": "/w", "prompt": "p", "session_id": "not-a-uuid"}, "UUID"),
                      ({"cwd": "/w", "prompt": "p", "tmux": "main; rm"}, '"tmux" must be')]:
        with pytest.raises(launch.LaunchError, match=text.replace("(", r"\(")):
            launch.parse(doc)


def test_the_host_decides_by_its_roots_resolved_its_modes_and_its_client(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "repo").mkdir(parents=True)
    outside.mkdir()
    (root / "link").symlink_to(outside)
    (tmp_path / "root-too").mkdir()  # a sibling whose name starts like the root's: not inside it
    c = cfg([str(root)])
    ok = launch.plan(launch.parse({"cwd": str(root / "repo"), "prompt": "--help"}), c, {"PATH": "/bin"}, "h")
    assert isinstance(ok, launch.Plan) and ok.argv[1:] == ["--session-id", ok.launch.session_id, "--permission-mode",
                                                            "default", "--", "--help"]
    for cwd, text in [(root / "link", "outside"), (root / "link" / "x", "outside"), (tmp_path / "root-too", "outside"),
                      (root / "repo" / ".." / "..", "outside"), (root / "missing", "does not exist")]:
        got = launch.plan(launch.parse({"cwd": str(cwd), "prompt": "p"}), c, {}, "h")
        assert isinstance(got, str) and text in got, (cwd, got)
    assert "launching is off on host h" in str(launch.plan(launch.parse({"cwd": str(root), "prompt": "p"}), cfg(), {}, "h"))
    by = launch.parse({"cwd": str(root), "prompt": "p", "permission_mode": "bypassPermissions"})
    assert "bypassPermissions is not allowed on host h" in str(launch.plan(by, c, {}, "h"))
    assert isinstance(launch.plan(by, cfg([str(root)], modes=["bypassPermissions"]), {"PATH": "/bin"}, "h"), launch.Plan)
    plan_only = launch.parse({"cwd": str(root), "prompt": "p"})
    got = launch.plan(plan_only, cfg([str(root)], modes=["plan"]), {"PATH": "/bin"}, "h")
    assert isinstance(got, launch.Plan) and got.argv[4] == "plan"  # no mode asked: the host's first allowed
    missing = launch.plan(plan_only, cfg([str(root)], claude="no-such-client-here"), {"PATH": str(tmp_path)}, "h")
    assert "'no-such-client-here' ([launch] claude) is not an executable" in str(missing)
    relative = launch.plan(plan_only, cfg([str(root)], claude="bin/claude"), {"PATH": "/bin"}, "h")
    assert "is not an executable" in str(relative)


def test_the_session_gets_the_servers_environment_without_credentials_plus_its_identity() -> None:
    base = {"PATH": "/bin", "HOME": "/h", "AGENT_HOOKS_FLEET_TOKEN": "secret", "AGENT_HOOKS_OPENCLAW_TOKEN": "gw",
            "AGENT_HOOKS_TASK_ID": "old-task", "TMUX_PANE": "%9", "CLAUDECODE": "1", "ANTHROPIC_API_KEY": "k"}
    item = launch.parse({"cwd": "/w", "prompt": "p", "label": "x", "task_id": "T-2", "agent": "ada"})
    env = launch.session_env(base, item)
    assert env == {"PATH": "/bin", "HOME": "/h", "ANTHROPIC_API_KEY": "k", "AGENT_HOOKS_TMUX_SESSION": "agent-x",
                   "AGENT_HOOKS_TASK_ID": "T-2", "AGENT_HOOKS_AGENT": "ada"}
    assert "AGENT_HOOKS_TASK_ID" not in launch.session_env(base, launch.parse({"cwd": "/w", "prompt": "p"}))


def test_a_control_that_is_stale_or_malformed_is_refused_not_run(tmp_path: Path) -> None:
    c = cfg([str(tmp_path)])
    spec = launch.parse({"cwd": str(tmp_path), "prompt": "p"}).spec()
    import json

    results = launch.run_controls([{"seq": 3, "at": 100.0, "reason": json.dumps(spec)},
                                   {"seq": 4, "at": 1000.0, "reason": "not json"},
                                   {"seq": 5, "at": 1000.0, "reason": json.dumps({**spec, "cwd": "rel"})}],
                                  c, {}, str(tmp_path), "h", 60.0, 1000.0)
    assert [r["seq"] for r in results] == [3, 4, 5]
    assert "older than launch.max_age_s" in results[0]["error"]
    assert "no spec" in results[1]["error"] and "absolute" in results[2]["error"]


def test_configuration_and_doctor_say_what_is_wrong(tmp_path: Path) -> None:
    bad = cfg(["relative/dir", 5], modes=["default", "yolo"])
    problems = config_mod.validate(bad)
    assert any("launch.roots[0] must be an absolute directory" in p for p in problems), problems
    assert any("launch.roots[1]" in p for p in problems)
    assert any("launch.permission_modes[1] must be one of" in p for p in problems)
    assert [c.summary for c in checks.launch_checks(cfg())] == ["launching is off (no [launch] roots)"]
    lines = checks.launch_checks(cfg([str(tmp_path), "/no/such/root"], claude=str(tmp_path / "nothing")))
    assert [c.status for c in lines] == ["warn", "warn"], lines
    good = checks.launch_checks(cfg([str(tmp_path)], claude="/bin/true"))
    assert good[0].status == "ok" and os.path.realpath(tmp_path) in good[0].summary, good
