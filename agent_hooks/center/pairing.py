"""Pairing: a one-time code traded for a host's or a device's own credential (center/credentials.py).

* ``POST /api/fleet/pair`` ``{"code"}``: a host's code (``agent-hook fleet pair
  --host NAME``) for that host's credential, which ``agent-hook fleet join``
  keeps in ``<config dir>/fleet-credential``: 200 ``{"ok", "kind": "host",
  "host", "credential", "center"}``.
* ``GET /pair`` (``?code=`` fills the field): a small page to pair this
  browser. Opening the link ``agent-hook fleet pair --device NAME`` prints
  shows it with the code in place; one press of its button sends it.
* ``POST /pair`` (the page's form, or JSON ``{"code"}``): a device's code for
  its credential, set as the ``agent_hooks_device`` cookie (HttpOnly,
  SameSite=Strict, Secure over https, Path=/), then to the board (303).

No credential is needed here: the code is the proof, once, within its minutes.
A GET never spends a code (a link preview or a prefetch would spend it, and
keep the credential). A code that is unknown is 401, already used 409,
expired 410, of the other kind 409; each says what to do. The front door
still holds (server/access.py): a page of another origin cannot post here.
"""

from __future__ import annotations

import html
import json
import time
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from agent_hooks.center import contract, credentials
from agent_hooks.center.hub import hub_of
from agent_hooks.server import access
from agent_hooks.server.app import ServerState, state_of
from agent_hooks.server.body import read

MAX_BODY_BYTES = contract.MAX_BODY_BYTES  # a code and little else; the API's one limit (server/body.py)
# The device cookie lasts as long as browsers keep one (about 400 days); revoking it is what ends it.
DEVICE_COOKIE_MAX_AGE_S = 400 * 86400


def _address(request: Request) -> str:
    client = request.scope.get("client")
    return str(client[0]) if client else "?"


async def _code_from(request: Request) -> str:
    """The code in a JSON body ``{"code"}`` or a form (``code=...``); BodyError for a bad body."""
    raw = await read(request.scope, request.receive, MAX_BODY_BYTES)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        doc = contract.parse_json(raw, MAX_BODY_BYTES)
        code = doc.get("code")
    else:
        try:
            code = (parse_qs(raw.decode("utf-8"), max_num_fields=10).get("code") or [""])[0]
        except (UnicodeDecodeError, ValueError) as exc:
            raise contract.BodyError(f"the form cannot be read: {exc}") from None
    if not isinstance(code, str) or not code.strip():
        raise contract.BodyError('no pairing code: send {"code": "XXXX-XXXX-XXXX"}')
    if len(code) > 100:
        raise contract.BodyError("that is no pairing code (too long)")
    return code


async def _redeem(state: ServerState, code: str, kind: str, address: str) -> tuple[str, str]:
    hub = hub_of(state)
    try:
        name, credential = await hub.write(credentials.redeem, code, kind, time.time(), address)
        return str(name), str(credential)
    except credentials.PairingError:
        state.stats.count("pairing_refused")
        raise


async def pair_host(request: Request) -> Response:
    """POST /api/fleet/pair {"code"}: a host's credential for its code."""
    state = state_of(request)
    try:
        code = await _code_from(request)
        name, credential = await _redeem(state, code, credentials.HOST, _address(request))
    except contract.BodyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    except credentials.PairingError as exc:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)
    return JSONResponse({"ok": True, "kind": credentials.HOST, "host": name, "credential": credential,
                         "center": hub_of(state).own_host}, headers={"Cache-Control": "no-store"})


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pair this device · agent-hooks</title>
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; margin: 0; padding: 2rem 1rem; background: #f6f7f9; color: #1d2330; }}
main {{ max-width: 26rem; margin: 0 auto; background: #fff; border-radius: 10px; padding: 1.5rem;
        box-shadow: 0 1px 4px rgba(0,0,0,.12); }}
h1 {{ font-size: 1.3rem; margin: 0 0 .5rem; }}
input {{ font: 1.3rem ui-monospace, monospace; width: 100%; box-sizing: border-box; padding: .5rem;
         letter-spacing: .08em; text-transform: uppercase; }}
button {{ font-size: 1.1rem; margin-top: 1rem; padding: .6rem 1.2rem; border: 0; border-radius: 6px;
          background: #2456d6; color: #fff; width: 100%; }}
.err {{ color: #a31d1d; background: #fdecec; padding: .6rem; border-radius: 6px; }}
.note {{ color: #5b6475; font-size: .9rem; }}
</style></head>
<body><main>
<h1>Pair this device with the command center {center}</h1>
{error}
<p>Type the code <code>agent-hook fleet pair --device NAME</code> printed, or open the link it printed.</p>
<form method="post" action="/pair">
<label for="code">Pairing code</label>
<input id="code" name="code" value="{code}" autocomplete="one-time-code" autocapitalize="characters"
       spellcheck="false" placeholder="XXXX-XXXX-XXXX" required>
<button type="submit">Pair this device</button>
</form>
<p class="note">The code works once, for a few minutes. This browser then keeps its own credential
(a cookie), which the command center's owner can revoke (agent-hook fleet revoke --device NAME).</p>
</main></body></html>
"""


def page(center: str, code: str = "", error: str | None = None, status: int = 200) -> HTMLResponse:
    """The pairing page; every value from the request or the store escaped."""
    shown = f'<p class="err" role="alert">{html.escape(error)}</p>' if error else ""
    body = PAGE.format(center=html.escape(center), code=html.escape(code[:40], quote=True), error=shown)
    # same-origin: the code in this page's URL is never sent to another site as a Referer (no-referrer
    # would also make the browser send "Origin: null" with the form, which the front door refuses).
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store",
                                                           "Referrer-Policy": "same-origin"})


async def pair_page(request: Request) -> Response:
    """GET /pair[?code=...]: the page, the code in its field. Nothing is spent here."""
    return page(hub_of(state_of(request)).own_host, request.query_params.get("code") or "")


async def pair_device(request: Request) -> Response:
    """POST /pair: a device's code for its credential, kept as this browser's cookie; then the board."""
    state = state_of(request)
    center = hub_of(state).own_host
    wants_json = request.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"
    code = ""
    try:
        code = await _code_from(request)
        name, credential = await _redeem(state, code, credentials.DEVICE, _address(request))
    except (contract.BodyError, credentials.PairingError) as exc:
        status = exc.status
        if wants_json:
            return JSONResponse({"error": str(exc)}, status_code=status)
        return page(center, code, str(exc), status)
    response: Response
    if wants_json:
        response = Response(json.dumps({"ok": True, "kind": credentials.DEVICE, "device": name, "center": center}),
                            media_type="application/json")
    else:
        response = RedirectResponse("/", status_code=303)
    response.set_cookie(access.DEVICE_COOKIE, credential, max_age=DEVICE_COOKIE_MAX_AGE_S, path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    if access.COOKIE in request.cookies:  # this browser is the device now, not a holder of the owner's key
        response.delete_cookie(access.COOKIE, httponly=True, samesite="strict")
    response.headers["Cache-Control"] = "no-store"
    return response


def routes(state: ServerState) -> list[BaseRoute]:
    return [
        Route("/api/fleet/pair", pair_host, methods=["POST"]),
        Route("/pair", pair_page, methods=["GET"]),
        Route("/pair", pair_device, methods=["POST"]),
    ]
