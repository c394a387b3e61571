"""The shuffler's HTTP API (a Flask app served by the same stack as the aggregator: gunicorn, uvicorn, the
front's header, body and rate limits, :mod:`deniable.aggregator.server`).

* ``POST /api/v1/campaigns/<id>/reports`` (public, devices): 1..1000 shuffled envelopes; the reply has the
  aggregator's shape, one verdict per report, sent only after the accepted ones are committed;
  Browsers may post from any page (the survey page of ``/survey/<id>`` on the aggregator, an app's own page):
  the route answers CORS, ``Access-Control-Allow-Origin: *`` without credentials, and its preflight
  (``OPTIONS``, ``Content-Type`` allowed). It is public and takes no cookie or token, so letting pages read
  its verdicts gives them nothing they could not get by posting from anywhere else;
* ``GET /api/v1/shuffler`` (public): the shuffler's public keys and the aggregator it forwards to, what the
  aggregator's admin registers in a shuffled campaign;
* ``GET /api/v1/status`` (public): counts only (reports pending, batches waiting, forwarded) per campaign;
* ``GET /healthz``: the database answers.

Errors have the API's JSON shape; nothing a client sends gives a 5xx (502 only when the aggregator cannot be
reached for a campaign this shuffler has never seen). Each worker process runs a forwarder thread
(:meth:`~deniable.aggregator.shuffler.service.Shuffler.run_forwarder`) when ``FORWARD_INTERVAL`` is set.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, current_app, request
from werkzeug.wrappers import Response

from deniable.aggregator.api.bodies import json_body
from deniable.aggregator.api.errors import register_error_handlers
from deniable.aggregator.api.reports import _spend_ingestion_tokens
from deniable.aggregator.shuffler.service import Shuffler
from deniable.shared.limits import MAX_BODY_BYTES_DEFAULT

__all__ = ["create_shuffler_app"]

bp = Blueprint("shuffler", __name__)


def _shuffler() -> Shuffler:
    shuffler: Shuffler = current_app.extensions["deniable-shuffler"]
    return shuffler


@bp.get("/healthz")
def healthz() -> dict[str, Any]:
    _shuffler().store.connection().execute("SELECT 1").fetchone()
    return {"status": "ok"}


@bp.get("/api/v1/shuffler")
def info() -> dict[str, Any]:
    return _shuffler().info()


@bp.get("/api/v1/status")
def status() -> dict[str, Any]:
    return _shuffler().status()


#: The CORS answer of the device route (public, no credentials): any page may post reports and read verdicts.
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST",
    "Access-Control-Allow-Headers": "Content-Type",
    "Access-Control-Max-Age": "600",
}


@bp.after_request
def _cors(response: Response) -> Response:
    if request.endpoint == "shuffler.submit":
        response.headers.update(CORS_HEADERS)
    return response


@bp.post("/api/v1/campaigns/<campaign_id>/reports")
def submit(campaign_id: str) -> dict[str, Any]:
    body = json_body()
    _spend_ingestion_tokens(body)
    return _shuffler().submit(campaign_id, body)


def create_shuffler_app(config: Mapping[str, Any]) -> Flask:
    """A shuffler app over ``config["DATA_DIR"]`` forwarding to ``config["UPSTREAM"]``; with
    ``FORWARD_INTERVAL`` (seconds) it starts its forwarder thread (one per worker process)."""
    data_dir = Path(config["DATA_DIR"]).resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    app = Flask(__name__, static_folder=None, instance_path=str(data_dir))
    app.config.update({"MAX_CONTENT_LENGTH": MAX_BODY_BYTES_DEFAULT, **config})
    shuffler = Shuffler(
        data_dir,
        upstream=str(config["UPSTREAM"]),
        upstream_max_body=int(config.get("UPSTREAM_MAX_BODY", MAX_BODY_BYTES_DEFAULT)),
    )
    app.extensions["deniable-shuffler"] = shuffler
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.register_blueprint(bp)
    register_error_handlers(app)
    interval = config.get("FORWARD_INTERVAL")
    if interval:
        stop = threading.Event()
        thread = threading.Thread(
            target=shuffler.run_forwarder, args=(stop, float(interval)), name="deniable-forwarder", daemon=True
        )
        thread.start()
        app.extensions["deniable-forwarder"] = (thread, stop)
    return app
