"""User handlers: HOOK.md directories run by our events after the built-in guards (docs/handlers.md).

discovery (sources, precedence, path safety) -> registry (compiled on change, read
on every call with a few stat calls) -> eligibility (pure checks, each with a
reason) -> run (priority, isolation, merge). The hook path imports registry and,
only when a handler is due, run; discovery (and PyYAML) only on a rebuild.
"""

# The event dict / result dict contract handlers are written against (docs/handlers.md).
API_VERSION = 1
