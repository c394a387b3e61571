"""Shared test helpers: the real aggregator server as a subprocess, and simulated encrypted reports.

* :mod:`support.server`: :func:`start_server` runs ``deniable serve --data-dir DIR --port FREE`` with
  known tokens and returns a :class:`RunningServer` (url, tokens, data dir, log, HTTP helpers, ``stop``,
  ``kill`` (SIGKILL, for crash tests) and ``restart``).
* :mod:`support.reports`: :func:`simulate_envelopes` turns true values into sealed envelopes exactly as a
  device would (seeded ``simulate`` for the randomization), and :func:`upload` posts them in batches.
* :mod:`support.cli`: :func:`~support.cli.deniable` runs ``deniable ARGS`` in a subprocess, output captured.

The fixtures in ``tests/conftest.py`` wrap these: ``aggregator`` (one server per test module),
``fresh_aggregator`` (one per test) and ``server_factory`` (start as many as you like).
"""

from support.reports import device_reports, seal_reports, simulate_envelopes, upload
from support.server import RunningServer, free_port, start_server

__all__ = [
    "RunningServer",
    "device_reports",
    "free_port",
    "seal_reports",
    "simulate_envelopes",
    "start_server",
    "upload",
]
