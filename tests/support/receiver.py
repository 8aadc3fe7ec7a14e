"""A local webhook receiver for notification tests: a real HTTP server on 127.0.0.1 that keeps what was
posted to it (with the time it came), and answers 500 to the first ``fail_first`` posts."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """``url`` is its Apprise ``json://`` URL; ``got`` the JSON bodies it accepted, ``refused`` how many
    it answered 500. ``status`` may be changed while it runs (e.g. 500 to stand for a channel that is down);
    ``answer`` is the body of every answer (none by default). GET is taken as POST is."""

    def __init__(self, fail_first: int = 0, path: str = "/hook") -> None:
        self.fail_first = fail_first
        self.status = 200
        self.path = path
        self.got: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.raw: list[tuple[dict[str, str], bytes]] = []
        self.refused = 0
        self.answer = b""
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                at = time.time()
                with outer.lock:
                    outer.raw.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    fail = outer.refused < outer.fail_first or outer.status != 200
                    if fail:
                        outer.refused += 1
                    else:
                        try:
                            outer.got.append(json.loads(body))
                        except ValueError:
                            outer.got.append({"_raw": body.decode("utf-8", "replace")})
                        outer.times.append(at)
                self.send_response(500 if fail else (201 if "push" in self.path else 200))
                self.send_header("Content-Length", str(len(outer.answer)))
                self.end_headers()
                self.wfile.write(outer.answer)

            do_GET = do_POST  # noqa: N815 - http.server's name

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}{self.path}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.got)

    def wait(self, n: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = self.bodies()
            if len(got) >= n:
                return got
            time.sleep(0.02)
        raise AssertionError(f"the receiver got {len(self.bodies())} notification(s), not {n}, within {timeout} s"
                             f" (refused {self.refused})")
