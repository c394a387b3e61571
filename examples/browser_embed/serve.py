"""Serve the embedding example next to an aggregator, on one origin (what nginx does in production).

    .venv/bin/python examples/browser_embed/serve.py --aggregator http://127.0.0.1:8000 [--port 8080]

then open ``http://127.0.0.1:8080/?campaign=<id>``. The page and ``app.js`` are this folder's files; the
paths the browser client needs, ``/api/v1/...`` and ``/survey/static/survey*.js`` (the bundle and the two
files it imports when a campaign or the browser needs them), are forwarded to the aggregator unchanged, so
the page, the client bundle and the aggregator's API share one origin and a strict CSP (``script-src
'self'; connect-src 'self'``) holds. Standard library only; loopback by default.
"""

from __future__ import annotations

import argparse
import http.server
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The client bundle's files, forwarded to the aggregator (survey.js imports the other two on demand).
BUNDLE = {f"/survey/static/{name}" for name in ("survey.js", "survey-extra.js", "survey-compat.js")}
FILES = {"/": "index.html", "/index.html": "index.html", "/app.js": "app.js", "/style.css": "style.css"}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css"}
CSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; form-action 'none'; base-uri 'none'"


def handler(aggregator: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def _forward(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
            request = urllib.request.Request(aggregator + self.path, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    status, data, kind = answer.status, answer.read(), answer.headers.get("Content-Type", "")
            except urllib.error.HTTPError as error:
                status, data, kind = error.code, error.read(), error.headers.get("Content-Type", "")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path.startswith("/api/v1/") or path in BUNDLE:
                self._forward("GET")
                return
            name = FILES.get(path)
            if name is None:
                self.send_error(404)
                return
            data = (HERE / name).read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", TYPES[Path(name).suffix])
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path.startswith("/api/v1/campaigns/") and self.path.endswith("/reports"):
                self._forward("POST")
            else:
                self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description="serve the browser embedding example on one origin")
    parser.add_argument("--aggregator", required=True, help="the aggregator's base URL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer((args.host, args.port), handler(args.aggregator.rstrip("/")))
    print(
        f"serving the example at http://{args.host}:{server.server_address[1]}/ (aggregator {args.aggregator})",
        flush=True,
    )
    server.serve_forever()


if __name__ == "__main__":
    main()
