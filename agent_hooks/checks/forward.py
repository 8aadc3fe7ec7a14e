"""Forward area: the ingest server forwarding sends to."""

from __future__ import annotations

from typing import Any

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check


@check("forward", order=60)
def server(ctx: Context) -> list[Check]:
    """Whether the configured ingest server answers."""
    return check_server(ctx.cfg)


def check_server(cfg: dict[str, Any]) -> list[Check]:
    """Whether the ingest server answers (any HTTP answer counts; nothing is posted). With no
    command center named (forward.url empty, the default) there is nothing to check or fix."""
    fwd = cfg.get("forward") or {}
    if not fwd.get("enabled", True):
        return [Check("forward", OK, "forwarding disabled (forward.enabled = false)")]
    url = fwd.get("url")
    if not url:
        return [Check("forward", OK, "ingest server: not configured (no command center is named; set forward.url"
                      " to send events to one)", data={"url": "", "configured": False})]
    from agent_hooks.forward.eventmap import problems
    from agent_hooks.forward.urls import url_problem

    map_checks = [Check("forward", WARN, problem, "fix forward.event_map (see docs/forwarding.md)") for problem in problems(cfg)]
    refused = url_problem(url, bool(fwd.get("allow_remote")))
    if refused:
        # Not probed either: nothing goes off this host unless the user allowed it.
        return [Check("forward", FAIL, refused, "use a loopback URL, or set forward.allow_remote = true",
                      {"url": url})] + map_checks
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    probe = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/api/hooks/sessions", "", ""))
    try:
        with urllib.request.urlopen(urllib.request.Request(probe, method="GET"), timeout=2) as resp:
            code = resp.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return [Check("forward", FAIL, f"ingest server {url} does not answer ({reason})",
                      "start the command center, fix forward.url, or set forward.enabled = false; "
                      "events wait in the queue meanwhile", {"url": url, "configured": True})] + map_checks
    return [Check("forward", OK, f"ingest server answers at {parts.scheme}://{parts.netloc} (HTTP {code})",
                  data={"url": url, "status": code})] + map_checks
