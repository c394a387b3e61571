"""The deniable aggregator: campaigns, encrypted report ingestion, durable storage, estimates with errors.

``create_app(config)`` is the Flask app factory (see :mod:`deniable.aggregator.api.app`); ``deniable serve``
runs it under gunicorn. Flask is imported only when the factory is first used, so that the device commands
of the ``deniable`` CLI work without the aggregator's dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deniable.aggregator.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from deniable.aggregator.api.app import create_app

        return create_app
    raise AttributeError(f"module 'deniable.aggregator' has no attribute {name!r}")
