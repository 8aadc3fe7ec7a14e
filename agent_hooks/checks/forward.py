"""Forward area: the ingest server forwarding sends to."""

from __future__ import annotations

from typing import Any

from agent_hooks.checks import FAIL, OK, WARN, Check, Context, check


@check("forward", order=60)
def server(ctx: Context) -> list[Check]:
    """Whether the configured ingest server answers (each of them, when forward.url lists several)."""
    return check_server(ctx.cfg, ctx.conn)


def check_server(cfg: dict[str, Any], conn: Any = None) -> list[Check]:
    """Whether the ingest server answers (any HTTP answer counts; nothing is posted). With no
    command center named (forward.url empty, the default) there is nothing to check or fix. With
    several, each is probed, and the current one and the host's last move are shown."""
    fwd = cfg.get("forward") or {}
    if not fwd.get("enabled", True):
        return [Check("forward", OK, "forwarding disabled (forward.enabled = false)")]
    from agent_hooks.forward import centers

    urls = centers.ingest_urls(fwd)
    if not urls:
        return [Check("forward", OK, "ingest server: not configured (no command center is named; set forward.url"
                      " to send events to one)", data={"url": "", "configured": False})]
    from agent_hooks.forward.eventmap import problems

    map_checks = [Check("forward", WARN, problem, "fix forward.event_map (see docs/forwarding.md)") for problem in problems(cfg)]
    if len(urls) == 1:
        return _probe(urls[0], fwd) + map_checks
    choice = centers.read(conn, urls) if conn is not None else centers.Choice(urls)
    out: list[Check] = []
    for i, url in enumerate(urls):
        for c in _probe(url, fwd):
            mark = "current" if i == choice.current else "standby"
            out.append(Check(c.area, c.status if i == choice.current or c.status != FAIL else WARN,
                             f"{mark} command center {i + 1} of {len(urls)}: {c.summary}", c.fix,
                             {**(c.data or {}), "current": i == choice.current}))
    moved = ""
    if choice.switched_at:
        import datetime

        at = datetime.datetime.fromtimestamp(choice.switched_at).isoformat(timespec="seconds")
        moved = (f"; moved there {at} from {choice.switched_from} ({choice.reason}),"
                 f" {choice.switches} move(s) in all")
    out.append(Check("forward", OK, f"command centers: {len(urls)} in forward.url, current {choice.url}{moved}",
                     data=choice.status()))
    return out + map_checks


def _probe(url: str, fwd: dict[str, Any]) -> list[Check]:
    """One ingest server: refused by the URL rules, or whether it answers."""
    from agent_hooks.forward.urls import url_problem

    refused = url_problem(url, bool(fwd.get("allow_remote")))
    if refused:
        # Not probed either: nothing goes off this host unless the user allowed it.
        return [Check("forward", FAIL, refused, "use a loopback URL, or set forward.allow_remote = true",
                      {"url": url})]
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
                      "events wait in the queue meanwhile", {"url": url, "configured": True})]
    return [Check("forward", OK, f"ingest server answers at {parts.scheme}://{parts.netloc} (HTTP {code})",
                  data={"url": url, "status": code})]
