"""Every test gets its own AGENT_HOOKS_HOME and HOME: the real home is never touched."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The tests sit in one folder per subject (tests/server, tests/hooks, ...) and import their helpers
# from the support package beside this file (``from support.scripts import run_hook``): this folder
# is on sys.path whatever pytest's import mode (its default, prepend, puts it there for this file).
TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from support.tiers import selects_no_e2e_test  # noqa: E402

# pytest rewrites the asserts of each test module it imports: some 3 s of CPU for the whole suite, in
# every xdist worker. It keeps the result in each test folder's __pycache__, unless PYTHONDONTWRITEBYTECODE
# is set (as on this machine and its CI); then every run, and every worker, does it again. The suite keeps it
# either way, as it keeps the package's bytecode (pytest_configure below): a second run collects in a
# third of the time. The processes the tests start still inherit the variable.
sys.dont_write_bytecode = False

# The embedding model's matrix products (numpy's OpenBLAS) start a thread per core, which then spin: with
# four workers on two cores they only contend (the memory tests took a fifth more CPU). One thread each,
# here and in every process the tests start. A value the caller set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_report_header(config: pytest.Config) -> str:
    """Which Claude Code the e2e tier drives, at the top of every run's log."""
    from agent_hooks.claude_code import NEWEST_TESTED, PINNED

    asked = os.environ.get("AGENT_HOOKS_CLAUDE_VERSION") or PINNED
    if asked == "latest":
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
    if config.getoption("numprocesses", None):
        _rewrite_test_modules_once(config)


def _rewrite_test_modules_once(config: pytest.Config) -> None:
    """Write pytest's rewritten test modules to their cache before the xdist workers start.

    Each worker collects every test module, and in a fresh clone each rewrote all of them
    itself (their asserts; 3 s of CPU a process), at the same time, before any had written
    the cache the others would read. Done once here, the workers read the cache (1.5 s of
    collection each instead of 4.5). Only speed depends on this: pytest's private helpers
    are used as its own import hook uses them, and anything unexpected leaves the workers
    to rewrite as before.
    """
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        paths = [Path(str(a).split("::")[0]) for a in config.args] or [Path(str(config.rootpath)) / "tests"]
        skip_e2e = selects_no_e2e_test(config.getoption("markexpr") or "")
        for top in paths:
            files = [top] if top.is_file() else sorted(top.rglob("test_*.py")) + sorted(top.rglob("conftest.py"))
            for fn in files:
                fn = fn.resolve()
                if fn.suffix != ".py" or (skip_e2e and fn.is_relative_to(E2E_DIR)):
                    continue
                pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
                if rewrite._read_pyc(fn, pyc) is not None:
                    continue
                if not rewrite.try_makedirs(pyc.parent):
                    return
                stamp, code = rewrite._rewrite_test(fn, config)
                rewrite._write_pyc(state, code, stamp, pyc)
    except Exception:  # noqa: BLE001 - an optimisation only (see above)
        return


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


E2E_DIR = Path(__file__).resolve().parent / "e2e"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/e2e is not imported when ``-m`` leaves out every e2e test (the fast tier: -m "not e2e and not
    slow"). Everything under it is marked e2e (its conftest), so nothing that would run is missed, and
    each worker saves importing and collecting its hundred tests."""
    if collection_path == E2E_DIR and selects_no_e2e_test(config.getoption("markexpr") or ""):
        return True
    return None


# Tiers that take minutes run only when asked for by name: pytest -m load, pytest -m fuzz.
_OPT_IN_MARKERS = ("load", "fuzz")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = config.getoption("markexpr") or ""
    for item in items:
        for name in _OPT_IN_MARKERS:
            if item.get_closest_marker(name) and name not in asked:
                item.add_marker(pytest.mark.skip(reason=f"{name} tier: run with -m {name}"))


# Files whose tests spend most of their time waiting (on a server, a gateway, a timeout) rather than
# computing: a fifth to a third of the CPU of a test of the same length elsewhere (measured per file
# with getrusage over a whole run). On two cores with four workers the run is shortest when these are
# spread over its first two thirds, the longest first: each worker then has CPU work beside a wait,
# and the run does not end on a few long waits with the cores idle. Only speed depends on this list.
# Longest tests first (seconds per test in a -n 4 run, in brackets).
_MOSTLY_WAITING = (
    "test_server_conns.py",  # (6)
    "test_server_recovery.py",  # (3)
    "test_approvals_fleet.py", "test_board_browser.py", "test_persist_hooks.py",  # (2-3)
    "test_command_center_fleet.py", "test_fuzz.py", "test_memory_vectors.py", "test_openclaw.py",
    "test_board_fleet.py", "test_server_wiring.py", "test_forward_delivery.py", "test_front_door.py",
    "test_approvals.py", "test_server.py", "test_continuity_hooks.py", "test_drain_takeover.py",
    "test_guards_fail_closed.py", "test_newcomer_cli.py", "test_plugin.py",  # (0.5-1.5)
)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")  # after -m and -k deselected
def pytest_collection_modifyitems_spread(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: the mostly-waiting ones, longest first, evenly over the first two
    thirds; the others in their order."""
    rank = {name: i for i, name in enumerate(_MOSTLY_WAITING)}
    waiting = sorted((it for it in items if it.path.name in rank), key=lambda it: rank[it.path.name])
    rest = [it for it in items if it.path.name not in rank]
    if not waiting or not rest:
        return
    keyed = [(i / len(waiting) * 2 / 3, 0, it) for i, it in enumerate(waiting)]
    keyed += [(j / len(rest), 1, it) for j, it in enumerate(rest)]
    items[:] = [it for _, _, it in sorted(keyed, key=lambda k: (k[0], k[1]))]


# -- PostgreSQL: the command center's fleet in a server of the tests' own (support/postgres.py) -----------

@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One PostgreSQL cluster per test worker (about 0.6 s to start); skipped where none is installed."""
    from support.postgres import Postgres

    pg = Postgres().start()
    yield pg
    pg.stop()


_databases = iter(range(1, 1_000_000))


@pytest.fixture(scope="session")  # one per worker: the run interleaves modules (see above)
def shared_centers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The worker's command centers for tests marked shared_center (support/center.py: SharedCenters)."""
    from support.center import SharedCenters

    pool = SharedCenters(tmp_path_factory.mktemp("shared-centers"))
    yield pool
    pool.stop()


@pytest.fixture
def fleet_db(postgres_server: Any) -> str:
    """A new, empty database of that cluster: its URL, for [center] database."""
    return str(postgres_server.create_database(f"fleet_{os.getpid()}_{next(_databases)}"))


@pytest.fixture(params=["sqlite", "postgres"])
def center_db(request: pytest.FixtureRequest) -> str:
    """Each backend of the fleet store in turn: "" (the host's SQLite store), then a PostgreSQL URL."""
    if request.param == "sqlite":
        return ""
    return str(request.getfixturevalue("fleet_db"))
