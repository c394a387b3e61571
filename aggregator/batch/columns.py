"""Randomized reports as typed Parquet columns, and back into the vectorized form a mechanism tallies.

One codec per report layout (the mechanism's ``report_layout``, :data:`deniable.shared.mechanisms.base.REPORT_LAYOUTS`),
so that a partition is tallied by numpy without parsing JSON per row, and a new mechanism picks its codec
by declaring its layout:

* ``index`` (``binary-rr``, ``grr``): column ``report`` (int64), the reported category;
* ``bitmask`` (``oue``): column ``report`` (fixed-size binary of ⌈k/8⌉ bytes), the k-bit mask, bit v of the
  mask in bit v mod 8 of byte ⌊v/8⌋ (little-endian bit order, as ``numpy.unpackbits(bitorder="little")``
  reads it);
* ``seeded-bucket`` (``olh``): columns ``seed`` (uint64, the hash seed) and ``y`` (int64, the randomized bucket).

:func:`to_simulated` rebuilds exactly the arrays ``mechanism.simulate`` returns, so the mechanism's own
vectorized ``tally`` counts them: no support rule is written twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import Mechanism, OLHReports
from deniable.shared.mechanisms.base import REPORT_LAYOUTS, ReportLayout

__all__ = ["arrow_fields", "to_columns", "to_simulated"]


def _mask_bytes(k: int) -> int:
    return (k + 7) // 8


def _layout(mechanism: Mechanism[Any]) -> ReportLayout:
    layout: ReportLayout | None = getattr(mechanism, "report_layout", None)
    if layout is None or layout not in REPORT_LAYOUTS:
        raise InvalidParameter(
            f"mechanism {mechanism.name!r} declares no report_layout among {', '.join(REPORT_LAYOUTS)}: "
            "its reports have no column form"
        )
    return layout


def arrow_fields(mechanism: Mechanism[Any]) -> list[pa.Field]:
    """The Parquet fields that hold one report of ``mechanism``."""
    layout = _layout(mechanism)
    if layout == "seeded-bucket":
        return [pa.field("seed", pa.uint64(), nullable=False), pa.field("y", pa.int64(), nullable=False)]
    if layout == "bitmask":
        return [pa.field("report", pa.binary(_mask_bytes(mechanism.k)), nullable=False)]
    return [pa.field("report", pa.int64(), nullable=False)]


def to_columns(mechanism: Mechanism[Any], reports: Sequence[Any]) -> dict[str, pa.Array]:
    """Decoded device reports (``mechanism.decode_report`` output) → the arrays of :func:`arrow_fields`
    (``None`` → null: a survey question not answered by that row)."""
    fields = {f.name: f.type for f in arrow_fields(mechanism)}
    layout = _layout(mechanism)
    if layout == "seeded-bucket":
        return {
            "seed": pa.array([None if r is None else r.seed for r in reports], type=fields["seed"]),
            "y": pa.array([None if r is None else r.y for r in reports], type=fields["y"]),
        }
    if layout == "bitmask":
        width = _mask_bytes(mechanism.k)
        masks = [None if r is None else int(r).to_bytes(width, "little") for r in reports]
        return {"report": pa.array(masks, type=fields["report"])}
    return {"report": pa.array([None if r is None else int(r) for r in reports], type=fields["report"])}


def to_simulated(mechanism: Mechanism[Any], table: pa.Table) -> Any:
    """The columns of ``table`` as ``mechanism.simulate`` output, which ``mechanism.tally`` counts."""
    layout = _layout(mechanism)
    if layout == "seeded-bucket":
        seeds = table.column("seed").to_numpy().astype(np.uint64, copy=False)
        return OLHReports(seeds, table.column("y").to_numpy().astype(np.int64, copy=False))
    if layout == "bitmask":
        width = _mask_bytes(mechanism.k)
        column = table.column("report").combine_chunks()
        raw = np.frombuffer(column.buffers()[1], dtype=np.uint8)
        start = column.offset * width
        masks = raw[start : start + len(column) * width].reshape(len(column), width)
        return np.unpackbits(masks, axis=1, bitorder="little")[:, : mechanism.k].astype(bool)
    return table.column("report").to_numpy().astype(np.int64, copy=False)
