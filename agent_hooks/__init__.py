"""agent-hooks: Claude Code hook executables on a shared SQLite store."""

__version__ = "0.1.0"
