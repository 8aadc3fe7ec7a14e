"""``agent-hook approvals``, ``approve`` and ``deny``: answer held permission dialogs, questions and gates.

Without ``--server`` they act on this host's store directly (no server needed):
the waiting hook sees the answer within a tenth of a second. With ``--server
URL`` they go through that server's ``/api/approvals`` (a command center
elsewhere), with the fleet token when one is set. docs/approvals.md.
"""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import quote

import click

from agent_hooks import fleet
from agent_hooks.cli.common import Exit, NotFound, center_json, echo_json, load_config, open_store, writing
from agent_hooks.cli.table import cell
from agent_hooks.features import approvals as ap

SERVER_HELP = "Ask this server (a command center elsewhere) instead of this host's store."


class AlreadyAnswered(click.ClickException):
    """The request was answered (or withdrawn, or expired) first: exit 1 with what happened."""

    exit_code = Exit.ERROR


def _who() -> str:
    try:
        import pwd

        name = pwd.getpwuid(os.geteuid()).pw_name
    except (KeyError, ImportError):
        name = "?"
    return f"uid {os.geteuid()} ({name})"


def _request(server: str, method: str, path: str, body: dict[str, Any] | None = None,
             params: dict[str, str] | None = None, ok: tuple[int, ...] | None = None) -> tuple[int, dict[str, Any]]:
    _base, status, doc = center_json(server, method, path, ok=ok, json=body, params=params, timeout=10)
    return status, doc


def _left(row: dict[str, Any]) -> str:
    if row["state"] != ap.PENDING or not row.get("expires_at"):
        return ""
    return f"{max(0, int(row['expires_at'] - time.time()))} s left"


def _line(row: dict[str, Any]) -> str:
    shown = ap.summary({**row, "tool_input": _json_text(row.get("tool_input")),
                        "questions": _json_text(row.get("questions"))}, 90)
    state = row["state"] if row["state"] != ap.PENDING else _left(row)
    # Who asks, as the board names it: "bob · bob-ask" (agent and tmux session), else the session id.
    who = " · ".join(str(x) for x in (row.get("agent"), row.get("tmux_session")) if x) or row["session_id"][:12]
    return (f"{row['id']:12}  {row['host'] or '-':14.14}  {cell(who, 24)}  {row['session_id'][:12]:12}"
            f"  {row['kind']:10}  {state:14}  {shown}")


def _add_names(conn: Any, rows: list[dict[str, Any]]) -> None:
    """Each request's agent and tmux session, from its session's row (None when unknown here)."""
    for row in rows:
        found = conn.execute("SELECT agent, tmux_session FROM sessions WHERE session_id = ?",
                             (row["session_id"],)).fetchone()
        row["agent"], row["tmux_session"] = found if found else (None, None)


def delivery_text(notifications: list[dict[str, Any]]) -> str:
    """'phone sent (2 times); ntfy #2 retrying: HTTP 500' for a request's notifications."""
    parts = []
    for n in notifications:
        said = f"{n.get('channel')} {n.get('state')}"
        if n.get("sends", 0) > 1:
            said += f" ({n['sends']} times)"
        if n.get("error"):
            said += f": {' '.join(str(n['error']).split())[:120]}"
        parts.append(said)
    return "; ".join(parts)


def _json_text(value: Any) -> str | None:
    import json

    return None if value is None else json.dumps(value)


def _questions_text(row: dict[str, Any]) -> list[str]:
    out = []
    for i, q in enumerate(row.get("questions") or [], 1):
        if not isinstance(q, dict):
            continue
        options = ", ".join(str(o.get("label")) for o in q.get("options") or [] if isinstance(o, dict))
        multi = " (several allowed)" if q.get("multiSelect") else ""
        out.append(f"    Q{i}: {q.get('question')}{multi}  [{options}]")
    return out


@click.command(name="approvals")
@click.option("--all", "show_all", is_flag=True, help="Every request kept (answered ones too), not only pending.")
@click.option("--session", "session_id", default=None, metavar="ID", help="Only this session's requests.")
@click.option("--server", default=None, metavar="URL", help=SERVER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def approvals_cmd(show_all: bool, session_id: str | None, server: str | None, as_json: bool) -> None:
    """List permission dialogs, questions and approval gates waiting for an answer (oldest first).

    Answer one with `agent-hook approve ID` or `agent-hook deny ID --message M`.
    """
    which = "all" if show_all else ap.PENDING
    if server:
        params = {"state": which}
        if session_id:
            params["session"] = session_id
        _status, doc = _request(server, "GET", "/api/approvals", params=params, ok=(200,))
        rows = doc.get("approvals") or []
    else:
        store = open_store()
        if store is None:
            rows = []
        else:
            try:
                own = fleet.host_name(load_config())
                from agent_hooks.notify.outbox import attach

                rows = attach(store.conn, [ap.public(r, own) for r in ap.listing(store.conn, which, session_id)])
                _add_names(store.conn, rows)
            finally:
                store.close()
    if as_json:
        echo_json({"approvals": rows})
        return
    if not rows:
        click.echo("nothing is waiting for an answer" if not show_all else "no approval requests recorded")
        return
    click.echo(f"{'ID':12}  {'HOST':14}  {'AGENT':24}  {'SESSION':12}  {'KIND':10}  {'STATE':14}  REQUEST")
    for row in rows:
        click.echo(_line(row))
        if row["kind"] == ap.QUESTION and row["state"] == ap.PENDING:
            for text in _questions_text(row):
                click.echo(text)
        if row.get("notifications"):
            click.echo(f"    notified: {delivery_text(row['notifications'])}")


def _settle(ref: str, server: str | None, body: dict[str, Any], as_json: bool) -> None:
    if not server and ref.startswith("oc-"):
        # An OpenClaw request is answered through the gateway, which this host's server holds (docs/openclaw.md).
        from agent_hooks.cli.fleet import local_server

        server = local_server()
    if server:
        status, doc = _request(server, "POST", f"/api/approvals/{quote(ref, safe='')}", body={**body, "via": "api"})
    else:
        if open_store() is None:
            raise NotFound(f"no approval request {ref!r} (nothing recorded on this host yet)")
        with writing() as conn:
            result = ap.answer(conn, ref, body["decision"], message=body.get("message"),
                               interrupt=bool(body.get("interrupt")), answers=body.get("answers"),
                               by=_who(), via="cli", where=fleet.host_name(load_config()))
            asked = ap.find(conn, ref) if result.result == "invalid" else None
        if asked is not None and asked["kind"] == ap.QUESTION and "answers" not in body and body["decision"] != "deny":
            raise click.UsageError(_answer_hint(asked["id"], ap.public(asked, "")["questions"]))
        if result.result == "unknown":
            raise NotFound(result.error or f"no approval request {ref!r}")
        if result.result == "already":
            raise AlreadyAnswered(result.error or "already answered")
        if result.row is None:
            raise click.ClickException(result.error or "the answer does not fit the request")
        status, doc = 200, {"ok": True, "approval": ap.public(result.row, fleet.host_name(load_config()))}
    if status == 400 and "answers" not in body and body["decision"] != "deny" and "question" in str(doc.get("error")):
        raise click.UsageError(_answer_hint(ref, None))
    if status == 404:
        raise NotFound(doc.get("error") or f"no approval request {ref!r}")
    if status == 409:
        raise AlreadyAnswered(doc.get("error") or "already answered")
    if status != 200:
        raise click.ClickException(str(doc.get("error") or doc))
    row = doc["approval"]
    if as_json:
        echo_json(doc)
        return
    answer = row.get("answer") or {}
    extra = ""
    if answer.get("answers"):
        extra = "; " + "; ".join(f"{q} -> {a}" for q, a in answer["answers"].items())
    if answer.get("decision") == "allow_always" and not row.get("suggestions"):
        extra += " (the client offered no rule to remember, so it is allowed once)"
    click.echo(f"{row['id']}: {row['state']}{extra}")


def _answer_hint(ref: str, questions: Any) -> str:
    """What to type to answer a question, in this command's terms (the API's shape is not for a shell)."""
    texts = [str(q.get("question")) for q in questions or [] if isinstance(q, dict) and q.get("question")]
    labels = [[str(o.get("label")) for o in q.get("options") or [] if isinstance(o, dict)]
              for q in questions or [] if isinstance(q, dict) and q.get("question")]
    first = texts[0] if texts else "QUESTION"
    label = labels[0][0] if labels and labels[0] else "LABEL"
    example = f'agent-hook approve {ref} --answer "{first}={label}"'
    more = " (one --answer per question)" if len(texts) > 1 else ""
    listed = "".join(f"\n  Q{i}: {t}  [{', '.join(o)}]" for i, (t, o) in enumerate(zip(texts, labels, strict=True), 1))
    return (f"{ref} is a question: answer it with --answer QUESTION=LABEL{more}, for example:\n  {example}"
            f"{listed}\nA question may be named by its text, its header or its number.")


@click.command()
@click.argument("approval_id")
@click.option("--always", is_flag=True,
              help="Allow and remember it as the dialog's own \"always allow\" would (the client's suggested rules).")
@click.option("--answer", "answers", multiple=True, metavar="QUESTION=LABEL",
              help="A question's answer: the question's text, header or number, then an option's label or any text."
                   " Repeat for several questions, or for several options of one.")
@click.option("--server", default=None, metavar="URL", help=SERVER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def approve(approval_id: str, always: bool, answers: tuple[str, ...], server: str | None, as_json: bool) -> None:
    """Allow a waiting request (ID or a unique prefix), or answer a question with --answer.

    The first answer wins: one given at the terminal, the board or another
    command first makes this one fail with "already answered".
    """
    try:
        parsed = ap.parse_answers(list(answers)) if answers else None
    except ap.AnswerError as exc:
        raise click.UsageError(str(exc)) from None
    body: dict[str, Any] = {"decision": "allow_always" if always else "allow"}
    if parsed:
        body["answers"] = parsed
    _settle(approval_id, server, body, as_json)


@click.command()
@click.argument("approval_id")
@click.option("--message", "-m", required=True, help="Why, and what to do instead: the model reads it.")
@click.option("--interrupt", is_flag=True, help="Also stop the agent's turn (it waits for the next prompt).")
@click.option("--server", default=None, metavar="URL", help=SERVER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def deny(approval_id: str, message: str, interrupt: bool, server: str | None, as_json: bool) -> None:
    """Deny a waiting request (ID or a unique prefix) with a message the model reads."""
    if not message.strip():
        raise click.UsageError("--message must say something: the model reads it")
    _settle(approval_id, server, {"decision": "deny", "message": message, "interrupt": interrupt}, as_json)


COMMANDS = [approvals_cmd, approve, deny]
