"""agent-hook init / paths / config / status."""

from __future__ import annotations

import json
from pathlib import Path

from support.repo import fixture_payload
from support.scripts import agent_hook, fresh_env, run_exe, run_hook


def test_paths_all_under_agent_hooks_home(hooks_home: Path) -> None:
    data = json.loads(agent_hook("paths", "--json").stdout)
    assert data["home"] == str(hooks_home)
    for key in ("store", "config_file", "log_dir", "error_log"):
        assert data[key].startswith(str(hooks_home)), key


def test_paths_follow_xdg_without_agent_hooks_home(tmp_path: Path) -> None:
    env = {"AGENT_HOOKS_HOME": "", "XDG_DATA_HOME": str(tmp_path / "d"), "XDG_STATE_HOME": str(tmp_path / "s"),
           "XDG_CONFIG_HOME": str(tmp_path / "c")}
    data = json.loads(agent_hook("paths", "--json", env=env).stdout)
    assert data["store"] == str(tmp_path / "d" / "agent-hooks" / "store.db")
    assert data["error_log"] == str(tmp_path / "s" / "agent-hooks" / "logs" / "errors.log")
    assert data["config_file"] == str(tmp_path / "c" / "agent-hooks" / "config.toml")


def test_config_precedence_defaults_file_environment(hooks_home: Path) -> None:
    cfg = json.loads(agent_hook("config", "--json").stdout)
    assert cfg["runtime"]["deadline_ms"] == 4000
    hooks_home.mkdir(parents=True, exist_ok=True)
    (hooks_home / "config.toml").write_text('[runtime]\ndeadline_ms = 2500\n[identity]\nagent = "ada"\n')
    cfg = json.loads(agent_hook("config", "--json").stdout)
    assert cfg["runtime"]["deadline_ms"] == 2500 and cfg["identity"]["agent"] == "ada"
    assert cfg["runtime"]["busy_timeout_ms"] == 2500  # untouched default kept
    cfg = json.loads(agent_hook("config", "--json", env={"AGENT_HOOKS_DEADLINE_MS": "1800",
                                                         "AGENT_HOOKS__IDENTITY__ROLE": "lead"}).stdout)
    assert cfg["runtime"]["deadline_ms"] == 1800 and cfg["identity"]["role"] == "lead"
    assert cfg["identity"]["agent"] == "ada"


def test_config_reports_invalid_file_and_unknown_keys(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True, exist_ok=True)
    (hooks_home / "config.toml").write_text('[runtime]\ndeadline_ms = "soon"\nbogus = 1\n')
    proc = agent_hook("config", check=False)
    assert proc.returncode == 0
    assert "runtime.deadline_ms must be int" in proc.stderr and "unknown setting runtime.bogus" in proc.stderr
    (hooks_home / "config.toml").write_text("[runtime\n")
    proc = agent_hook("config", check=False)
    assert proc.returncode == 1 and "invalid configuration" in proc.stderr


def test_a_center_database_that_is_not_postgresql_is_refused_by_name(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True, exist_ok=True)
    config = hooks_home / "config.toml"
    config.write_text('[center]\ndatabase = "/var/lib/fleet.db"\n')
    accepted = ("center.database must be empty (the host's SQLite store) or a postgresql:// or postgres:// URL,"
                " got '/var/lib/fleet.db'")
    proc = agent_hook("status", check=False)
    assert proc.returncode == 1 and f"invalid configuration: {config}: {accepted}" in proc.stderr, proc.stderr
    # The environment's value is named as the variable, without the password it carries.
    proc = agent_hook("status", check=False, env={"AGENT_HOOKS__CENTER__DATABASE": "mysql://fleet:s3cret@db/fleet"})
    assert proc.returncode == 1 and "$AGENT_HOOKS__CENTER__DATABASE: center.database must be empty" in proc.stderr
    assert "got 'mysql://fleet:***@db/fleet'" in proc.stderr and "s3cret" not in proc.stderr
    # `config` shows it as a warning, and the hooks go on with their work (the setting is the center's).
    proc = agent_hook("config", check=False)
    assert proc.returncode == 0 and f"warning: {accepted}; the command center keeps" in proc.stderr, proc.stderr
    assert run_hook(fixture_payload("SessionStart-startup.json")).returncode == 0
    # Both accepted forms, and empty, load.
    for value in ("postgresql://fleet@db/fleet", "postgres://fleet@db/fleet", ""):
        config.write_text(f'[center]\ndatabase = "{value}"\n')
        assert agent_hook("status", check=False).returncode == 0, value


def test_init_creates_then_is_idempotent(hooks_home: Path) -> None:
    first = agent_hook("init").stdout
    assert "applied m001" in first
    assert "schema is current" in agent_hook("init").stdout


def test_status_json_shape(hooks_home: Path) -> None:
    assert json.loads(agent_hook("status", "--json").stdout) == {
        "sessions": [], "errors": 0, "errors_seen_at": None,
        "spool": {"spooled": 0, "pending": 0, "replayed": 0, "duplicates": 0, "failed": 0}}
    env = {"OPTIMALOS_SESSION_TMUX": "agent-build-1", "AGENT_HOOKS_AGENT": "ada", "AGENT_HOOKS_ROLE": "lead"}
    for name in ("SessionStart-startup.json", "PreToolUse-Bash.json", "PostToolUseFailure-Bash.json",
                 "PreToolUse-Edit.json", "PostToolUse-Edit.json"):
        assert run_hook(fixture_payload(name), env=env).returncode == 0
    run_exe("agent-hook-stop", b"garbage")
    data = json.loads(agent_hook("status", "--json").stdout)
    assert data["errors"] == 1
    (s,) = data["sessions"]
    assert set(s) >= {"session_id", "state", "tool_calls", "last_activity_at", "cwd", "tmux_session", "agent", "role"}
    assert s["session_id"] == fixture_payload("Stop.json")["session_id"]
    assert s["state"] == "live" and s["tool_calls"] == 2
    assert s["tmux_session"] == "agent-build-1" and s["agent"] == "ada" and s["role"] == "lead"
    assert s["cwd"] == "/home/dev/acme"
    assert s["last_activity_at"].endswith("Z")
    text = agent_hook("status").stdout
    assert s["session_id"] in text and "1 error not yet marked seen" in text


def test_tmux_name_from_our_own_variable(hooks_home: Path) -> None:
    run_hook(fixture_payload("SessionStart-startup.json"), env={"AGENT_HOOKS_TMUX_SESSION": "agent-x"})
    (s,) = json.loads(agent_hook("status", "--json").stdout)["sessions"]
    assert s["tmux_session"] == "agent-x"


def test_read_only_command_does_not_migrate(hooks_home: Path) -> None:
    import sqlite3

    hooks_home.mkdir(parents=True)
    sqlite3.connect(hooks_home / "store.db").execute("CREATE TABLE x (a)").connection.close()
    proc = agent_hook("status", check=False)
    assert proc.returncode == 1 and "agent-hook init" in proc.stderr
    conn = sqlite3.connect(hooks_home / "store.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0


def test_a_setting_under_the_wrong_section_is_named_with_its_own(hooks_home: Path) -> None:
    hooks_home.mkdir(parents=True, exist_ok=True)
    (hooks_home / "config.toml").write_text("[loops]\ndealine_ms = 100\n")
    assert "unknown setting loops.dealine_ms (did you mean runtime.deadline_ms?)" in agent_hook("config").stderr


def test_config_shows_what_is_in_effect_as_toml_that_round_trips(hooks_home: Path) -> None:
    import tomllib

    hooks_home.mkdir(parents=True, exist_ok=True)
    (hooks_home / "config.toml").write_text('[loops]\nwindow = "forty"\n[runtime]\ndealine_ms = 100\n'
                                            'deadline_ms = 3000\n')
    proc = agent_hook("config")
    doc = tomllib.loads(proc.stdout)  # valid TOML: it can be pasted into config.toml
    assert doc["loops"]["window"] == 40, "the hooks use the default for a value they cannot read"
    assert doc["runtime"]["deadline_ms"] == 3000
    assert "dealine_ms" not in doc["runtime"], "an unknown key is not in effect"
    assert "loops.window must be int, got 'forty'; using the default 40" in proc.stderr
    assert "unknown setting runtime.dealine_ms (did you mean deadline_ms?)" in proc.stderr
    as_json = json.loads(agent_hook("config", "--json").stdout)
    assert as_json == doc
    # Nested tables and lists of tables survive the round trip.
    assert doc["loops"]["tools"] == {"BashOutput": {"enabled": False}, "TaskOutput": {"enabled": False}}
    assert doc["polling"]["rules"][0]["name"] == "ci-watch"
    noted = agent_hook("config", "--sources").stdout
    assert "deadline_ms = 3000  # file" in noted
    assert tomllib.loads(noted) == doc


def test_config_init_writes_a_private_file(hooks_home: Path) -> None:
    import os
    import stat
    import tomllib

    proc = agent_hook("config", "init")
    path = hooks_home / "config.toml"
    assert str(path) in proc.stdout
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert tomllib.loads(path.read_text())["runtime"]["deadline_ms"] == 4000
    again = agent_hook("config", "init", check=False)
    assert again.returncode == 1 and "exists" in again.stderr


def test_config_init_with_an_unusable_config_dir_is_a_clear_error(tmp_path: Path) -> None:
    """`agent-hook config init` printed a Python traceback (FileExistsError / PermissionError from
    makedirs) when the config directory could not be made; a user error is one clear line."""
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    proc = agent_hook("config", "init", env=fresh_env(tmp_path, AGENT_HOOKS_HOME=str(in_the_way)),
                      inherit=False, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "Error:" in proc.stderr and str(in_the_way) in proc.stderr, proc.stderr


def test_config_init_force_twice_keeps_the_users_file(tmp_path: Path) -> None:
    """`config init --force` kept the old file as config.toml.bak, overwriting any earlier .bak: run twice,
    the user's own configuration (the first .bak) was replaced by the defaults and lost."""
    state = tmp_path / "state"
    env = fresh_env(tmp_path, AGENT_HOOKS_HOME=str(state))
    state.mkdir(mode=0o700)
    mine = '# my own settings\n[heartbeat]\nstalled_after_s = 60\n'
    (state / "config.toml").write_text(mine)
    for _ in range(2):
        proc = agent_hook("config", "init", "--force", env=env, inherit=False, check=False)
        assert proc.returncode == 0, proc.stderr
    kept = [p for p in state.iterdir() if p.name.startswith("config.toml.bak")]
    assert any(p.read_text() == mine for p in kept), [p.name for p in kept]


def test_config_cache_is_private_whatever_the_umask(hooks_home: Path) -> None:
    import os
    import stat
    import subprocess

    from support.scripts import BIN

    hooks_home.mkdir(parents=True, exist_ok=True)
    (hooks_home / "config.toml").write_text('[identity]\nagent = "ada"\n')
    os.chmod(hooks_home / "config.toml", 0o600)
    subprocess.run(["sh", "-c", f"umask 022 && {BIN / 'agent-hook'} config >/dev/null"], check=True, timeout=60)
    cache = hooks_home / "config.cache.json"
    assert cache.exists() and stat.S_IMODE(cache.stat().st_mode) == 0o600
