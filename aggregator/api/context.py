"""The service behind the request being handled: the one bridge from Flask's app context to plain Python."""

from __future__ import annotations

from flask import current_app

from deniable.aggregator.service import Service

__all__ = ["current_service"]


def current_service() -> Service:
    """The :class:`~deniable.aggregator.service.Service` of the app handling the current request."""
    service: Service = current_app.extensions["deniable"]
    return service
