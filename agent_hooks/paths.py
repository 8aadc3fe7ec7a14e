"""Where state lives: ``$AGENT_HOOKS_HOME`` when set, else the XDG directories.

Every other module asks this one; tests point ``AGENT_HOOKS_HOME`` at a
temporary directory and nothing touches the real home.
"""

from __future__ import annotations

import os

APP = "agent-hooks"


class Paths:
    """The files of one installation, resolved from an environment mapping."""

    __slots__ = ("home", "data_dir", "state_dir", "config_dir")

    def __init__(self, environ: os._Environ[str] | dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        home = env.get("AGENT_HOOKS_HOME")
        if home:
            home = os.path.abspath(os.path.expanduser(home))
            self.home: str | None = home
            self.data_dir = self.state_dir = self.config_dir = home
            return
        self.home = None
        user_home = env.get("HOME") or os.path.expanduser("~")
        self.data_dir = os.path.join(env.get("XDG_DATA_HOME") or os.path.join(user_home, ".local", "share"), APP)
        self.state_dir = os.path.join(env.get("XDG_STATE_HOME") or os.path.join(user_home, ".local", "state"), APP)
        self.config_dir = os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(user_home, ".config"), APP)

    @property
    def store(self) -> str:
        return os.path.join(self.data_dir, "store.db")

    @property
    def log_dir(self) -> str:
        return os.path.join(self.state_dir, "logs")

    @property
    def error_log(self) -> str:
        return os.path.join(self.log_dir, "errors.log")

    @property
    def notice_log(self) -> str:
        """Things worth knowing that are not errors (e.g. events we have no handler for)."""
        return os.path.join(self.log_dir, "notices.log")

    @property
    def config_file(self) -> str:
        return os.path.join(self.config_dir, "config.toml")

    @property
    def config_cache(self) -> str:
        return os.path.join(self.state_dir, "config.cache.json")

    @property
    def lock_dir(self) -> str:
        return os.path.join(self.state_dir, "locks")

    def as_dict(self) -> dict[str, str | None]:
        return {
            "home": self.home,
            "store": self.store,
            "config_file": self.config_file,
            "log_dir": self.log_dir,
            "error_log": self.error_log,
            "notice_log": self.notice_log,
            "data_dir": self.data_dir,
            "state_dir": self.state_dir,
            "config_dir": self.config_dir,
        }


def ensure_dir(path: str) -> None:
    """Create ``path`` (and parents) readable by the user only.

    Every directory we create is 0700, parents included: os.makedirs gives the
    parents it makes the umask's mode (often 0755), so a first error-log line
    could leave the state directory readable by others.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    except FileNotFoundError:
        parent = os.path.dirname(os.path.normpath(path))
        if not parent or parent == path:
            raise
        ensure_dir(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass


def write_private(path: str, text: str, backup: bool = False) -> None:
    """Write ``path`` atomically with mode 0600, whatever the umask (a config can name commands the
    hooks run). ``backup``: an existing file is kept as ``.bak`` (``.bak-2``, ...: never over an
    earlier backup, which is the user's own file). On an OSError the temporary file is removed."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if backup and os.path.exists(path):
            bak, n = path + ".bak", 1
            while os.path.lexists(bak):
                n += 1
                bak = f"{path}.bak-{n}"
            os.replace(path, bak)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
