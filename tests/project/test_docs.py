"""The README and docs/ stay true: links resolve, TOML examples are valid, commands and settings are all found.

The README is the front door (short, its test command is what CI runs); the
reference lives in docs/, one page per concern.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import click
import pytest

from agent_hooks import config
from agent_hooks.cli import cli

from support.repo import ROOT

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.+)$", text, re.M):
        base = slug(m[1])
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))


def test_slug_matches_github() -> None:
    assert slug("Checking: `agent-hook doctor`") == "checking-agent-hook-doctor"
    assert slug("Guards (PreToolUse, UserPromptSubmit)") == "guards-pretooluse-userpromptsubmit"


def test_there_are_pages_and_links() -> None:
    assert len(PAGES) >= 10
    assert sum(len(links(p)) for p in PAGES) >= 30


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not ours to check offline
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if ROOT not in dest.parents and dest != ROOT:
            broken.append(f"{target}: outside the repository")
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {_id(dest)}")
    assert broken == []


def test_toml_examples_are_valid_configuration() -> None:
    blocks = [(p, b) for p in PAGES for b in re.findall(r"```toml\n(.*?)```", p.read_text(), re.S)]
    assert len(blocks) >= 5
    for page, block in blocks:
        cfg = config.defaults()
        config._merge(cfg, tomllib.loads(block))
        assert config.validate(cfg) == [], (_id(page), block)


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "keep the README to a few screens; move reference into docs/"
    for topic in ("## Requirements", "## Install", "## The first five minutes", "## Commands at a glance",
                  "## Removing everything", "## Tests", "## Documentation"):
        assert topic in text
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in text, f"README does not link {page.name}"


def test_the_readme_test_command_is_what_ci_runs() -> None:
    text = README.read_text()
    section = text.split("## Tests", 1)[1].split("\n## ", 1)[0]
    (command,) = re.findall(r"```sh\n(.*?)\n```", section, re.S)
    assert command == "bash .ci/run"
    ci = (ROOT / ".ci" / "run").read_text()
    # The README spells out what .ci/run runs: both pytest lines, verbatim.
    for line in re.findall(r"`([^`]*-m pytest[^`]*)`", section):
        assert line in ci, line


def _leaves(cmd: click.Command, prefix: str) -> list[str]:
    if isinstance(cmd, click.Group):
        return [leaf for name, sub in sorted(cmd.commands.items()) for leaf in _leaves(sub, f"{prefix} {name}")]
    return [prefix]


def test_the_command_reference_lists_every_command() -> None:
    reference = (ROOT / "docs" / "commands.md").read_text()
    missing = [c for c in _leaves(cli, "agent-hook") if c not in reference]
    assert missing == []


def test_every_configuration_section_has_a_page() -> None:
    table = (ROOT / "docs" / "configuration.md").read_text()
    assert [s for s in config.DEFAULTS if f"`[{s}]`" not in table] == []


# -- words and numbers a reader can trust ---------------------------------------------------------------

# Our own history is not the reader's: no "seed" (the OptimalOS contract, named as such) and no "issue 12".
INTERNAL = re.compile(r"\bseeds?\b|\bseed's\b|\bissues? \d+|\bissue-\d+", re.I)
PRODUCT_TEXT = [README, *sorted((ROOT / "docs").glob("*.md")),
                *sorted(p for p in (ROOT / "agent_hooks").rglob("*") if p.suffix in (".py", ".html", ".js", ".css"))]


def _help_texts(command: click.Command, path: str = "agent-hook") -> list[tuple[str, str]]:
    out = [(path, command.help or ""), *((f"{path} {p.name}", getattr(p, "help", None) or "") for p in command.params)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            out += _help_texts(sub, f"{path} {name}")
    return out


def test_no_internal_words_in_docs_ui_or_help() -> None:
    found = [f"{_id(p)}:{n}: {line.strip()}" for p in PRODUCT_TEXT
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if INTERNAL.search(line)]
    found += [f"{where}: {text}" for where, text in _help_texts(cli) if INTERNAL.search(text)]
    assert not found, "name the thing itself, not our issues or the seed:\n" + "\n".join(found)


def test_executable_counts_in_the_docs_are_the_packages() -> None:
    """'all N executables': N is what pyproject installs (one agent-hook-* per hooked event)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    hooks = len([name for name in scripts if name.startswith("agent-hook-")])
    claims = [(_id(p), int(m[1])) for p in PAGES
              for m in re.finditer(r"\b(\d+) (?:hook )?executables\b", p.read_text(encoding="utf-8"))]
    assert claims, "docs/install.md says how many executables doctor checks"
    assert [c for c in claims if c[1] != hooks] == [], f"pyproject installs {hooks} hook executables"
    # The protocol page's table names each of them, with its event.
    from agent_hooks.wiring.table import HOOKS

    table = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| (\w+) \| `(agent-hook-[\w-]+)` \|$", table, re.M))
    assert rows == {(h.event, h.executable) for h in HOOKS} and len(HOOKS) == hooks


def _default_ports() -> set[int]:
    """Every port the default configuration names: the server's, and those inside default URLs."""
    ports: set[int] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, str):
            ports.update(int(p) for p in re.findall(r"^\w+://[^/:]+:(\d+)", value))
    defaults = config.defaults()
    ports.add(int(defaults["serve"]["port"]))
    walk(defaults)
    return ports


def test_ports_in_the_docs_are_the_defaults() -> None:
    """A host:port in the docs is a port the defaults use (the server's [serve] port, the forward URL's)."""
    allowed = _default_ports()
    assert int(config.defaults()["serve"]["port"]) in allowed
    stale = [f"{_id(p)}:{n}: {m[0]}" for p in PAGES for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             for m in re.finditer(r"\b(?:127\.0\.0\.1|localhost|cc|\[::1\]):(\d{2,5})\b", line)
             if int(m[1]) not in allowed]
    assert not stale, f"ports that are no default ({sorted(allowed)}):\n" + "\n".join(stale)
