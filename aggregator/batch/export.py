"""``deniable export``: the stored randomized reports of one local campaign as Parquet files.

Layout of an export directory::

    descriptor.json          the campaign's public descriptor, as the service serves it
    manifest.json            format, campaign, mechanism, columns, files, and the service's tallies
    reports/part-00000.parquet, part-00001.parquet, ...   at most ``rows_per_file`` reports each

Each row is one accepted report: ``round`` ('' outside recurring campaigns), ``day`` (the UTC day it
arrived, the finest time the store keeps), ``group_<field>`` for every group field (null where the device
sent none) and the report columns of :mod:`.columns` (a survey: per question its state and report columns,
:mod:`.survey_columns`). No report id, pseudonym, address or finer time is
exported. The reports and the tallies in the manifest are read in one snapshot (a read transaction), so
``deniable batch`` can check that the files recount to exactly the service's tallies, even when the export
ran beside live ingestion.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deniable.aggregator.batch.columns import arrow_fields, to_columns
from deniable.aggregator.batch.survey_columns import question_fields, survey_arrays
from deniable.aggregator.service import config_of
from deniable.aggregator.store import Store
from deniable.aggregator.survey_tally import layout
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter

__all__ = ["EXPORT_FORMAT", "export_campaign", "group_column", "read_manifest", "schema_of"]

#: The manifest's ``format`` value; readers refuse any other.
EXPORT_FORMAT = "deniable-export/1"

#: Reports per Parquet file (a Dask partition each) and per row group inside it.
ROWS_PER_FILE = 1_000_000
_ROW_GROUP = 131_072


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What an export wrote: the directory, the number of reports and the Parquet files."""

    directory: Path
    reports: int
    files: tuple[str, ...]


def group_column(field: str) -> str:
    """The Parquet column of group field ``field``."""
    return f"group_{field}"


def schema_of(config: CampaignConfig) -> pa.Schema:
    """The Parquet schema of a campaign's exported reports."""
    public = [pa.field("round", pa.string(), nullable=False), pa.field("day", pa.date32(), nullable=False)]
    groups = [pa.field(group_column(f), pa.string()) for f in config.group_fields]
    if config.is_survey:
        return pa.schema(public + groups + [f for q in config.questions for f in question_fields(q)])
    return pa.schema(public + groups + arrow_fields(config.build_mechanism()))


def _batches(
    config: CampaignConfig, rows: Iterable[tuple[str, str, dict[str, str], str]], size: int
) -> Iterator[pa.RecordBatch]:
    mechanism = None if config.is_survey else config.build_mechanism()
    schema = schema_of(config)
    chunk: list[tuple[str, str, dict[str, str], str]] = []

    def flush() -> pa.RecordBatch:
        arrays: dict[str, Any] = {
            "round": pa.array([r[0] for r in chunk], pa.string()),
            "day": pa.array([dt.date.fromisoformat(r[1]) for r in chunk], pa.date32()),
        }
        for f in config.group_fields:
            arrays[group_column(f)] = pa.array([r[2].get(f) for r in chunk], pa.string())
        if mechanism is None:
            arrays.update(survey_arrays(config, [json.loads(r[3]) for r in chunk]))
        else:
            arrays.update(to_columns(mechanism, [mechanism.decode_report(json.loads(r[3])) for r in chunk]))
        return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)

    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield flush()
            chunk = []
    if chunk:
        yield flush()


def _check_target(directory: Path) -> None:
    if directory.exists() and any(directory.iterdir()):
        raise InvalidParameter(f"{directory} is not empty; export into a new or empty directory")
    if not directory.parent.exists():
        raise InvalidParameter(f"{directory.parent} does not exist; create it first or choose another --to")


def export_campaign(
    store: Store, campaign_id: str, directory: Path, *, rows_per_file: int = ROWS_PER_FILE
) -> ExportSummary:
    """Write the campaign's reports, descriptor and tallies under ``directory`` (new or empty).

    A local survey (format 3) is exported too, every question in columns of its own (:mod:`.survey_columns`), the
    tallies in the manifest being its tally vectors (every question's answers, skips and tally per row).

    Raises :class:`InvalidParameter` for a central campaign or survey (its stored answers are raw), a
    non-empty target, or a missing parent directory;
    :class:`UnknownCampaign` for an unknown id. Nothing is written when it raises before the reports.
    """
    record = store.get_campaign(campaign_id)
    config = config_of(record)
    if config.trust_model != "local":
        raise InvalidParameter(
            f"campaign {campaign_id!r} is central: its stored answers are raw, and an export would take them "
            "out of the curator's custody; export local campaigns only (central results are released with "
            "noise by the estimate route)"
        )
    _check_target(directory)
    (directory / "reports").mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    total = 0
    tallies: list[dict[str, Any]] = []
    with store.read_snapshot():
        n_reports = store.get_campaign(campaign_id).n_reports
        writer: pq.ParquetWriter | None = None
        rows_in_file = 0
        for batch in _batches(config, store.iter_export_rows(campaign_id), _ROW_GROUP):
            offset = 0
            while offset < batch.num_rows:
                if writer is None:
                    name = f"reports/part-{len(files):05d}.parquet"
                    files.append(name)
                    writer = pq.ParquetWriter(directory / name, batch.schema, compression="zstd")
                    rows_in_file = 0
                take = min(batch.num_rows - offset, rows_per_file - rows_in_file)
                writer.write_batch(batch.slice(offset, take), row_group_size=_ROW_GROUP)
                offset += take
                rows_in_file += take
                total += take
                if rows_in_file == rows_per_file:
                    writer.close()
                    writer = None
        if writer is not None:
            writer.close()
        for round_ in sorted(store.stored_rounds(campaign_id)):
            for (field, value), tally in sorted(store.all_tallies(campaign_id, round=round_).items()):
                tallies.append(
                    {"round": round_, "group_field": field, "group_value": value, "n": tally.n,
                     "support": list(tally.support)}
                )
    if total != n_reports:  # the snapshot makes this impossible; never write a manifest that lies
        raise RuntimeError(f"exported {total} reports but the campaign counts {n_reports}")
    manifest = {
        "format": EXPORT_FORMAT,
        "campaign_id": campaign_id,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "mechanism": "survey" if config.is_survey else config.build_mechanism().name,
        "k": None if config.is_survey else config.k,
        "group_fields": list(config.group_fields),
        "columns": schema_of(config).names,
        "n_reports": total,
        "files": files,
        "tallies": tallies,
    }
    if config.is_survey:  # where each question sits in the tally vectors, and its columns
        manifest["questions"] = [
            {"id": slot.question.id, "kind": slot.question.kind, "mechanism": slot.question.mechanism,
             "columns": [f.name for f in question_fields(slot.question)], "tally_offset": slot.offset,
             "tally_width": slot.width}
            for slot in layout(config)
        ]  # fmt: skip
    _write_json(directory / "descriptor.json", config.to_json())
    _write_json(directory / "manifest.json", manifest)
    return ExportSummary(directory, total, tuple(files))


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_manifest(directory: Path) -> tuple[dict[str, Any], CampaignConfig]:
    """The manifest and the campaign descriptor of an export directory; clear errors for anything else."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        descriptor = json.loads((directory / "descriptor.json").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidParameter(
            f"{directory} is not a deniable export (missing {Path(exc.filename).name}); "
            "write one with 'deniable export'"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT:
        raise InvalidParameter(f"{directory}/manifest.json is not of format {EXPORT_FORMAT!r}")
    return manifest, CampaignConfig.from_json(descriptor)
