"""``deniable.analyst``: the analyst's client of a deniable aggregator, in Python and on the command line.

* :class:`Analyst`: campaigns (create, list, show, close), estimates as tidy :class:`Records` (CSV, JSON,
  pandas), central releases and accountant totals, the report timeline; over HTTP with the analyst or
  admin token.
* ``deniable campaigns ...``, ``deniable estimate ...``, ``deniable timeline ...``: the same from the shell
  (:mod:`deniable.analyst.cli`).

Light like the device client: the standard library and ``deniable.shared`` only (pandas optional).
The source lives in ``aggregator/analyst/`` (the analyst tools beside the service) and installs as
``deniable.analyst``.
"""

from __future__ import annotations

from deniable.analyst.client import Analyst, CampaignPage
from deniable.analyst.records import ESTIMATE_COLUMNS, TIMELINE_COLUMNS, Records, estimate_rows, timeline_rows

__all__ = [
    "ESTIMATE_COLUMNS",
    "TIMELINE_COLUMNS",
    "Analyst",
    "CampaignPage",
    "Records",
    "estimate_rows",
    "timeline_rows",
]
