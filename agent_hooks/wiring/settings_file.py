"""One settings file on disk: read it, lock it, write it (atomic, backed up), apply a merge."""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import stat
import sys
from typing import Any

from agent_hooks.paths import Paths
from agent_hooks.wiring import jsontext, merge
from agent_hooks.wiring.entries import our_groups
from agent_hooks.wiring.merge import Change, SettingsError, parse_root

BOM = "\ufeff"


def read_text(path: str) -> str | None:
    """The file's text (a byte-order mark kept), or None when it does not exist."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise SettingsError(f"{path} is not UTF-8 text; fix or move it, then re-run. "
                            "It was left untouched.") from None
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None


def read_settings(path: str) -> tuple[dict[str, Any], str | None]:
    """(document, original text); ({}, None) when the file does not exist. Refuses invalid files.

    The document is what Claude Code sees: comments ignored, the last of duplicate keys.
    """
    text = read_text(path)
    if text is None:
        return {}, None
    body = text.removeprefix(BOM)
    if not body.strip():
        return {}, text
    root = parse_root(body, path)
    return jsontext.value_of(body, root), text


def render(doc: dict[str, Any], like: str | None = None) -> str:
    """JSON text for a whole new document (two-space indent, like the template)."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


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
            stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
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


def _state_file(kind: str, path: str, suffix: str) -> str:
    """A file of ours about the settings file ``path``, in our state dir (so ~/.claude gets none)."""
    import hashlib

    p = Paths(os.environ)
    directory = p.lock_dir if kind == "lock" else os.path.join(p.state_dir, "wiring")
    try:
        # The state directory first: makedirs gives `mode` to the leaf only, the parents get the umask's.
        os.makedirs(p.state_dir, mode=0o700, exist_ok=True)
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise SettingsError(f"cannot create {directory} (our state directory): {exc.strerror}; "
                            "make it writable, or point AGENT_HOOKS_HOME at a directory you own") from None
    name = hashlib.sha256(path.encode()).hexdigest()[:16]
    return os.path.join(directory, f"settings-{name}{suffix}")


def _lock(path: str, timeout_s: float = 10.0) -> Any:
    """One lock per settings file, in our state directory (agent_hooks/locking.py)."""
    from agent_hooks.locking import FlockFile

    return FlockFile(_state_file("lock", path, ".lock"), timeout_s, SettingsError)


# In the install record: install created the settings file itself (there was none before it).
CREATED_FILE = "(file)"


def _holds_nothing(text: str) -> bool:
    """Is this settings text an empty object (whitespace around it)? Anything else is the user's."""
    try:
        return json.loads(text.removeprefix(BOM)) == {}
    except ValueError:
        return False


def read_created(path: str) -> list[str] | None:
    """What install created in the settings file ``path`` (None: no record, e.g. an older version)."""
    try:
        with open(_state_file("wiring", path, ".json"), encoding="utf-8") as f:
            created = json.load(f).get("created")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(c) for c in created] if isinstance(created, list) else None


def write_created(path: str, created: list[str] | None) -> None:
    """Record (or, with None, forget) what install created in ``path``."""
    record = _state_file("wiring", path, ".json")
    try:
        if created is None:
            os.unlink(record)
            return
        fd = os.open(record + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"path": path, "created": created}, f)
        os.replace(record + ".tmp", record)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise SettingsError(f"cannot write {record}: {exc.strerror}") from None


def default_bin_dir() -> str:
    """The directory of the running interpreter: the venv's bin, where our console scripts are."""
    return os.path.dirname(os.path.abspath(sys.executable))


def refuse_jsonc(body: str, path: str) -> None:
    """Install refuses a file Claude Code would ignore: our hooks would never run from it.

    Claude Code 2.1.197 and 2.1.330 run no hook from a settings.json with comments or
    trailing commas (they ignore the whole file, silently); a byte-order mark is fine.
    Uninstall still edits such a file (taking ours out, the comments kept).
    """
    found = jsonc_extensions(body, path)
    if found:
        raise SettingsError(f"{path} has {' and '.join(sorted(found))}: Claude Code ignores such a settings file, "
                            "so our hooks would never run from it. Make it plain JSON (or wire another file "
                            "with --settings/--project), then re-run. It was left untouched.")


def jsonc_extensions(body: str, path: str) -> set[str]:
    """What of JSONC (comments, trailing commas) the text uses: Claude Code reads none of it."""
    return parse_root(body, path).extensions


def resolve_target(path: str) -> str:
    """The file to edit: a symlinked settings.json (dotfiles) is edited at its target, the link kept."""
    real = os.path.realpath(path)
    if os.path.islink(path) and not os.path.exists(real):
        raise SettingsError(f"{path} is a symlink to {real}, which does not exist; fix the link "
                            "(or remove it), then re-run. Nothing was written.")
    return real


def apply(path: str, action: str, bin_dir: str, cfg: dict[str, Any], dry_run: bool = False,
          transport: str = "command") -> dict[str, Any]:
    """Install or uninstall in the file at ``path``; returns a report (also the --json shape).

    Only our entries change: the edits are spliced into the file's text. With
    ``dry_run`` nothing is written and the report carries the unified ``diff``.
    """
    real = resolve_target(path)
    with _lock(real):
        original = read_text(real)
        bom = BOM if original and original.startswith(BOM) else ""
        body = (original or "").removeprefix(BOM)
        if action == "install":
            groups = our_groups(bin_dir, cfg, transport)
            if body.strip():
                refuse_jsonc(body, real)
            if not body.strip():
                text, change = render({"hooks": {e: [g] for e, g in groups.items()}}), Change(added=len(groups))
                change.created = ["hooks", *(f"hooks.{e}" for e in groups)]
                if original is None:
                    change.created.insert(0, CREATED_FILE)
            else:
                text, change = merge.install(body, real, groups, read_created(real))
        else:
            created = read_created(real)
            if not body.strip():
                text, change = body, Change()
            else:
                text, change = merge.uninstall(body, real, created)
        report: dict[str, Any] = {"path": path, "action": action, "changed": False, "backup": None,
                                  "removed": change.removed, "added": change.added, "bin_dir": bin_dir,
                                  "transport": transport}
        text = bom + text
        if text == original or (original is None and action == "uninstall"):
            return report
        if action == "uninstall" and CREATED_FILE in (created or ()) and _holds_nothing(text):
            # Install created the file and nothing of the user's came into it since: remove it, with
            # no backup, as if we had never been there (an empty {} and a backup of our own entries
            # would be all that was left).
            report.update(changed=True, removed_file=True)
            if dry_run:
                report["diff"] = f"--- {path}\n+++ /dev/null (uninstall: the file install created goes)\n"
                return report
            try:
                os.unlink(real)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise SettingsError(f"cannot remove {path}: {exc.strerror}; it was left as it was") from None
            write_created(real, None)
            return report
        if dry_run:
            import difflib

            report["diff"] = "".join(difflib.unified_diff((original or "").splitlines(True), text.splitlines(True),
                                                          path, f"{path} ({action})"))
            return report
        report["backup"] = write_settings(real, text, original)
        report["changed"] = True
        if report["backup"]:
            from agent_hooks.backups import prune

            report["pruned_backups"] = prune(real, int(cfg["install"]["keep_backups"]))
        write_created(real, change.created if action == "install" else None)
        return report
