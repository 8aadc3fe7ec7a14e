"""The settings wiring: which hooks of ours go into Claude Code's settings.json, and how.

A domain package with no click in it; ``cli/settings.py`` (install, uninstall,
template) and ``cli/doctor.py`` are thin front-ends over it.

* ``table``: the event table, one row per hook we ship (data, in one place).
* ``entries``: what "an entry of ours" is (recognise it, build it).
* ``merge``: install / uninstall as edits of a settings document.
* ``settings_file``: read, lock, write (atomic, backed up) one settings file.
"""
