"""Every test gets its own AGENT_HOOKS_HOME and HOME: the real home is never touched."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest


def pytest_report_header(config: pytest.Config) -> str:
    """Which Claude Code the e2e tier drives, at the top of every run's log."""
    from agent_hooks.claude_code import NEWEST_TESTED, PINNED

    asked = os.environ.get("AGENT_HOOKS_CLAUDE_VERSION") or PINNED
    if asked == "latest":
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
        try:
            import claude_client

            asked = f"{claude_client.resolve('latest')} (latest)"
        except Exception as exc:  # noqa: BLE001 - the header must not stop the run; the tier reports it
            asked = f"latest (not resolved: {exc})"
    return (f"e2e tier: Claude Code {asked} (AGENT_HOOKS_CLAUDE_VERSION; pinned {PINNED}, "
            f"newest tested {NEWEST_TESTED})")


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package's bytecode once, before any test starts a console script.

    The tests run the installed executables as thousands of subprocesses. With
    PYTHONDONTWRITEBYTECODE set (as on this machine and its CI) and a fresh clone, no
    __pycache__ is ever written, and every one of them compiled agent_hooks from source
    again: 60 to 100 ms of CPU per process, a third of the fast tier. compileall writes the
    caches whatever that variable says; they are read back as usual, and kept fresh by
    their source's mtime. Once, in the main process (not in each xdist worker).
    """
    if hasattr(config, "workerinput"):
        return
    import compileall

    package = Path(__file__).resolve().parent.parent / "agent_hooks"
    try:
        compileall.compile_dir(str(package), quiet=1)
    except OSError:  # a read-only checkout: the tests still run, only slower
        pass


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every path at tmp_path; the real home directory is never touched."""
    for var in list(os.environ):
        # TMUX / TMUX_PANE too: a test run inside tmux must not name every test's session after it.
        if var.startswith("AGENT_HOOKS") or var in ("OPTIMALOS_SESSION_TMUX", "XDG_DATA_HOME",
                                                     "XDG_STATE_HOME", "XDG_CONFIG_HOME", "TMUX", "TMUX_PANE",
                                                     # A run inside a `claude -p` session must not make every test unattended.
                                                     "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ATTENDED"):
            monkeypatch.delenv(var, raising=False)
    home = tmp_path / "agent-hooks-home"
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("AGENT_HOOKS_HOME", str(home))
    monkeypatch.setenv("HOME", str(user_home))
    # No command center is named by default (forward.url is empty); this also keeps a test that
    # names one for another purpose from queueing events and starting a drainer that retries it
    # for minutes. Forwarding tests set up their own server and env.
    monkeypatch.setenv("AGENT_HOOKS__FORWARD__ENABLED", "false")
    # A PermissionRequest hook holds its dialog open for a remote answer (docs/approvals.md) for
    # minutes by default; tests that are not about approvals want the observer only. Theirs set it.
    monkeypatch.setenv("AGENT_HOOKS__APPROVALS__WAIT_S", "0")
    return home


@pytest.fixture
def hooks_home(isolated_env: Path) -> Path:
    return isolated_env


_store_template: list[Path] = []


@pytest.fixture
def migrated_store(isolated_env: Path) -> Path:
    """The test's store already at the current schema, as the first hook on a new host leaves it.

    A hook that meets no store creates and migrates it: a fifth of a second of CPU (sqlite-utils'
    import, fifteen migrations) and up to a second of fsyncs, in every test that starts from an
    empty AGENT_HOOKS_HOME. Under load that can pass the hook's own deadline, and the hook then
    answers before the store has its tables (the "no such table: sessions" the fast tier showed).
    Tests that are about what a hook records, not about creating the store, start from a copy of
    one store this process migrated with the package's own migration (agent_hooks.schema.migrate),
    private to the test (0600 in a 0700 home). Tests about a new or missing store must not use it.
    """
    if not _store_template:
        from agent_hooks.schema import migrate

        root = Path(tempfile.mkdtemp(prefix="agent-hooks-store-template-"))
        atexit.register(shutil.rmtree, root, True)
        migrate(str(root / "store.db"))
        _store_template.append(root / "store.db")
    isolated_env.mkdir(mode=0o700, parents=True, exist_ok=True)
    store = isolated_env / "store.db"
    shutil.copy2(_store_template[0], store)  # keeps its 0600 mode
    return store


# Tiers that take minutes run only when asked for by name: pytest -m load, pytest -m fuzz.
_OPT_IN_MARKERS = ("load", "fuzz")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = config.getoption("markexpr") or ""
    for item in items:
        for name in _OPT_IN_MARKERS:
            if item.get_closest_marker(name) and name not in asked:
                item.add_marker(pytest.mark.skip(reason=f"{name} tier: run with -m {name}"))
