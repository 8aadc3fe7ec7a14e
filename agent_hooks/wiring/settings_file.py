"""One settings file on disk: read it, lock it, write it (atomic, backed up), apply a merge."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import stat
import sys
from typing import Any

from agent_hooks.paths import Paths
from agent_hooks.wiring.merge import SettingsError, _check_shape, merge_install, merge_uninstall


def read_settings(path: str) -> tuple[dict[str, Any], str | None]:
    """(document, original text); ({}, None) when the file does not exist. Refuses invalid files."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}, None
    except UnicodeDecodeError:
        raise SettingsError(f"{path} is not UTF-8 text; fix or move it, then re-run. "
                            "It was left untouched.") from None
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    if not text.strip():
        return {}, text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix or move it, then re-run. It was left untouched."
        ) from None
    _check_shape(doc, path)
    return doc, text


def _indent_of(text: str | None) -> str | int:
    if text:
        m = re.search(r"\n([ \t]+)\"", text)
        if m:
            return m.group(1) if "\t" in m.group(1) else len(m.group(1))
    return 2


def render(doc: dict[str, Any], like: str | None = None) -> str:
    """JSON text for ``doc``, indented like the file it replaces."""
    return json.dumps(doc, indent=_indent_of(like), ensure_ascii=False) + "\n"


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=False) == json.dumps(b, sort_keys=False)


def write_settings(path: str, text: str, original: str | None) -> str | None:
    """Atomically replace ``path`` (temp file + os.replace); return the backup's path, if any."""
    directory = os.path.dirname(path)
    if original is not None:
        st = os.stat(path)
        if not st.st_mode & stat.S_IWUSR or not os.access(path, os.W_OK):
            raise SettingsError(f"{path} is read-only; make it writable (chmod u+w {shlex.quote(path)}) "
                                "or pick another file with --settings. It was left untouched.")
        mode = stat.S_IMODE(st.st_mode)
    else:
        mode = 0o600
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise SettingsError(f"cannot create {directory}: {exc.strerror}") from None
    backup = None
    tmp = os.path.join(directory, f".{os.path.basename(path)}.agent-hooks.{os.getpid()}.tmp")
    try:
        if original is not None:
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
            backup = f"{path}.bak-agent-hooks-{stamp}"
            n = 1
            while os.path.exists(backup):
                n += 1
                backup = f"{path}.bak-agent-hooks-{stamp}-{n}"
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(original)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise SettingsError(f"cannot write {path}: {exc.strerror or exc}; it was left untouched") from None
    return backup


def _lock(path: str) -> Any:
    import hashlib

    from filelock import FileLock

    p = Paths(os.environ)
    os.makedirs(p.lock_dir, mode=0o700, exist_ok=True)
    # One lock per settings file, kept in our state dir so ~/.claude gets no lock files.
    name = hashlib.sha256(path.encode()).hexdigest()[:16]
    return FileLock(os.path.join(p.lock_dir, f"settings-{name}.lock"), timeout=10)


def default_bin_dir() -> str:
    """The directory of the running interpreter: the venv's bin, where our console scripts are."""
    return os.path.dirname(os.path.abspath(sys.executable))


def apply(path: str, action: str, bin_dir: str, cfg: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
    """Install or uninstall in the file at ``path``; returns a report (also the --json shape).

    With ``dry_run`` nothing is written and the report carries the unified ``diff``.
    """
    real = os.path.realpath(path)  # a symlinked settings.json (dotfiles) keeps its link
    with _lock(real):
        doc, original = read_settings(real)
        if action == "install":
            new, change = merge_install(doc, bin_dir, cfg)
        else:
            new, change = merge_uninstall(doc)
        report: dict[str, Any] = {"path": path, "action": action, "changed": False, "backup": None,
                                  "removed": change.removed, "added": change.added, "bin_dir": bin_dir}
        if _same(new, doc) and (original is not None or action == "uninstall"):
            return report
        text = render(new, original)
        if dry_run:
            import difflib

            report["diff"] = "".join(difflib.unified_diff((original or "").splitlines(True), text.splitlines(True),
                                                          path, f"{path} ({action})"))
            return report
        report["backup"] = write_settings(real, text, original)
        report["changed"] = True
        return report
