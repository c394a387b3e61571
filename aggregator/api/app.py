"""The Flask app factory of the aggregator service.

``create_app({"DATA_DIR": path})`` builds a fresh app over the data dir: the SQLite store
(``deniable.sqlite3``), the campaign keys (``keys/``) and the tokens (``tokens/`` unless given); with
``DATABASE`` a PostgreSQL URL, the store is that database and the campaign keys are sealed in it. There
is no module-level app; ``deniable serve`` calls the factory once per gunicorn worker.

Configuration keys (all optional except ``DATA_DIR``):

``DATA_DIR``            where the database, keys and generated tokens live
``ADMIN_TOKEN``         bearer token that creates and closes campaigns (else read/generated in DATA_DIR)
``ANALYST_TOKEN``       bearer token that reads estimates (else read/generated in DATA_DIR)
``ISSUER_TOKEN``        bearer token of the app's backend for the admission-token issuing route (else
                        read/generated in DATA_DIR)
``MAX_CONTENT_LENGTH``  largest request body in bytes (default 8 MiB; larger bodies get 413)
``MAX_BATCH``           most envelopes in one report batch (default ``deniable.shared.contract.MAX_BATCH``)
``MIN_FREE_DISK_BYTES`` free space of the data dir's file system below which ``/readyz`` answers 503
                        (default 256 MiB)
``SECURE_COOKIES``      mark the dashboard's cookies ``Secure`` even when the request came over plain HTTP
                        (behind a TLS-terminating proxy; default: only when the request itself is HTTPS)
``MAX_GROUP_VALUES``    most distinct values of a group field without declared values (default 1000)
``DATABASE``            a ``postgresql://`` URL: the database several instances share (default: the SQLite
                        file ``deniable.sqlite3`` in DATA_DIR)
``KEY_ENCRYPTION_KEY``  the raw 32-byte key sealing the campaign keys in a PostgreSQL database (required
                        with ``DATABASE``; the same on every instance)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask

from deniable.aggregator.api import BLUEPRINTS
from deniable.aggregator.api.auth import install_auth
from deniable.aggregator.api.bodies import install_query_check
from deniable.aggregator.api.errors import register_error_handlers
from deniable.aggregator.secret_files import ensure_tokens
from deniable.aggregator.service import Service
from deniable.aggregator.store import DATABASE_NAME
from deniable.shared.contract import MAX_BATCH
from deniable.shared.limits import MAX_BODY_BYTES_DEFAULT, MAX_GROUP_VALUES_DEFAULT, MIN_FREE_DISK_BYTES_DEFAULT

__all__ = ["DATABASE_NAME", "create_app"]


DEFAULTS: dict[str, Any] = {
    "MAX_CONTENT_LENGTH": MAX_BODY_BYTES_DEFAULT,
    "MAX_BATCH": MAX_BATCH,
    "MIN_FREE_DISK_BYTES": MIN_FREE_DISK_BYTES_DEFAULT,
    "MAX_GROUP_VALUES": MAX_GROUP_VALUES_DEFAULT,
    "ADMIN_TOKEN": None,
    "ANALYST_TOKEN": None,
    "SECURE_COOKIES": False,
    "ISSUER_TOKEN": None,
    "DATABASE": None,
    "KEY_ENCRYPTION_KEY": None,
}


def create_app(config: Mapping[str, Any]) -> Flask:
    """A new aggregator app configured by ``config`` (see the module docstring for the keys)."""
    if not config.get("DATA_DIR"):
        raise ValueError("'DATA_DIR' must be set to the directory that holds the aggregator's data")
    data_dir = Path(config["DATA_DIR"]).resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    app = Flask(__name__, static_folder=None, instance_path=str(data_dir))
    app.config.update(DEFAULTS)
    app.config.update(config)
    app.config["DENIABLE_TOKENS"] = ensure_tokens(
        data_dir,
        admin=app.config["ADMIN_TOKEN"],
        analyst=app.config["ANALYST_TOKEN"],
        issuer=app.config["ISSUER_TOKEN"],
    )
    app.extensions["deniable"] = Service(
        data_dir,
        database=app.config["DATABASE"] or data_dir / DATABASE_NAME,
        kek=app.config["KEY_ENCRYPTION_KEY"],
        max_batch=int(app.config["MAX_BATCH"]),
        max_group_values=int(app.config["MAX_GROUP_VALUES"]),
        max_body=int(app.config["MAX_CONTENT_LENGTH"]),
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    install_auth(app)
    install_query_check(app)  # after authentication: a 401 says nothing about a route's parameters
    register_error_handlers(app)
    return app
