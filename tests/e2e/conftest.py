"""The e2e tier: the real Claude Code client, offline, with our hooks wired in.

Fixtures:

* ``claude_bin`` (session): the installed client (see ``claude_client.py``);
  the tier is skipped only when npm is missing; a failed install fails.
* ``model_server``: a started :class:`model_server.ModelServer` on 127.0.0.1.
* ``e2e``: an :class:`E2E` harness with its own HOME, AGENT_HOOKS_HOME and
  workspace, the hook settings, ``run()`` / ``compact()`` and store helpers.
* ``run_claude``: ``e2e.run``.

Every test in this directory gets the ``e2e`` marker: ``pytest -m e2e`` runs
the tier alone, ``pytest -m "not e2e"`` skips it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the helpers next to this file, whatever pytest's import mode
    sys.path.insert(0, str(HERE))

import claude_client  # noqa: E402
from harness import BIN_DIR, E2E, HOOK_EXECUTABLES  # noqa: E402
from model_server import ModelServer  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _under_here(item.path.parent):
            item.add_marker(pytest.mark.e2e)


@functools.cache
def _under_here(directory: Path) -> bool:
    # Once per directory: resolving the path of each of the 2,000 items cost 0.2 s in every worker.
    return directory.resolve().is_relative_to(HERE)


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The real client, installed once per run into the cache dir."""
    if claude_client.npm() is None:
        pytest.skip("npm not found: the e2e tier needs npm to install @anthropic-ai/claude-code")
    try:
        return claude_client.ensure_client()
    except claude_client.InstallError as exc:
        pytest.fail(f"installing Claude Code {claude_client.version()} failed: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def hook_bin_dir() -> Path:
    """The venv bin dir holding our executables; a missing one fails the tier."""
    missing = [exe for exe in HOOK_EXECUTABLES.values() if not (BIN_DIR / exe).exists()]
    if missing:
        pytest.fail(f"not installed in {BIN_DIR}: {missing} (pip install -e .)", pytrace=False)
    return BIN_DIR


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer().start()
    try:
        yield server
    finally:
        server.stop()


# http hooks that carry the session's variables in headers: observed on 2.1.330 (reference Part A2).
HTTP_CLIENT_VERSION = "2.1.330"


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str:
    """"command" (the executables) unless a test is parametrized with "http"."""
    return getattr(request, "param", "command")


@pytest.fixture
def e2e(claude_bin: Path, hook_bin_dir: Path, model_server: ModelServer, tmp_path: Path,
        transport: str) -> Iterator[E2E]:
    claude = claude_bin
    if transport == "http" and claude_client.version() not in claude_client.HTTP_HOOK_VERSIONS:
        try:
            claude = claude_client.ensure_client(HTTP_CLIENT_VERSION)
        except claude_client.InstallError as exc:
            pytest.skip(f"the http transport needs Claude Code {HTTP_CLIENT_VERSION}: {exc}")
    world = E2E(claude, model_server, tmp_path, transport)
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def run_claude(e2e: E2E) -> Any:
    return e2e.run
