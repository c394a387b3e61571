"""Batch analysis of exported reports: ``deniable export`` to Parquet, ``deniable batch`` on Dask.

The online service keeps one tally per (round, group field, group value): enough for the estimates it
serves, not for questions it was never asked. An export writes the stored *randomized* reports of one
local campaign, with their public fields, as Parquet files beside the campaign's descriptor and the
service's tallies read in the same snapshot; ``deniable batch`` recomputes every tally and estimate from
those files on a Dask cluster, checks them against the service, and answers what the online tallies
cannot: cross-tabulations of group fields and of two questions of a survey (:mod:`.survey_columns`), and
arbitrary filters on public fields.

Privacy: the reports of a local campaign are already ε-LDP, so every analysis of them is post-processing
and costs no budget. Central campaigns store raw answers; exporting them would move raw data out of the
curator's custody, so it is refused.

Modules: :mod:`.columns` (reports ↔ typed Parquet columns, per mechanism), :mod:`.export` (store →
Parquet), :mod:`.kernel` (one partition → partial tallies, plain numpy, engine-agnostic), :mod:`.run`
(the Dask driver and the checks), :mod:`.cli` (the two commands). Needs the ``batch`` extra
(``pip install 'deniable[batch]'``: pyarrow and dask.distributed).
"""

from __future__ import annotations

__all__: list[str] = []
