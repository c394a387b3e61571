"""The store on both backends (SQLite and PostgreSQL, ``database_target``): the ingest transaction and its
invariants, migrations; SQLite's durability settings and upgrade path; PostgreSQL's baseline schema."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.store import K, make_store, row

from deniable.aggregator.migrations import MIGRATIONS, SCHEMA_VERSION, migrate
from deniable.aggregator.store import OVERALL, ReportRow, Store
from deniable.shared.errors import CampaignClosed, StoreUnavailable, UnknownCampaign
from deniable.shared.limits import CONFLICT_RETRY_ATTEMPTS
from deniable.shared.mechanisms import Tally


def ingest(store: Store, rows: list[ReportRow], campaign_id: str = "c1") -> list[tuple[str, str | None]]:
    return store.ingest(campaign_id, rows, k=K, group_fields=("country",))


def test_new_database_is_migrated_with_wal_and_full_sync(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    conn = store.connection()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"campaigns", "reports", "tally_shards", "central_releases", "campaign_keys"} <= tables
    columns = {r[1] for r in conn.execute("PRAGMA table_info(campaigns)")}
    assert {"trust_model", "budget", "adjacency", "epsilon_spent"} <= columns


def test_reports_table_holds_no_network_or_ciphertext_data(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    columns = {r[1] for r in store.connection().execute("PRAGMA table_info(reports)")}
    assert columns == {
        "campaign_id", "report_id", "round", "pseudonym", "groups_json", "report_json", "received_day",
    }  # fmt: skip


def test_migrate_is_idempotent_and_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    Store(path).close()
    Store(path).close()  # reopening applies nothing twice
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn) == SCHEMA_VERSION
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="newer than this deniable"):
        migrate(conn)
    conn.close()


def test_a_failing_migration_leaves_the_database_untouched(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    broken = (("CREATE TABLE a (x INTEGER)", "CREATE TABLE a (x INTEGER)"),)
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, broken)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
    conn.close()


def test_ingest_accepts_then_classifies_duplicates(database_target: str | Path) -> None:
    store = make_store(database_target)
    assert ingest(store, [row(1, value=2), row(2, value=3, country="DE")]) == [("accepted", None)] * 2
    outcomes = ingest(store, [row(1, value=2), row(3, pseudonym=f"{1:064x}"), row(4), row(4)])
    assert [o[0] for o in outcomes] == ["duplicate", "duplicate", "accepted", "duplicate"]
    assert "report_id is already stored" in (outcomes[0][1] or "")
    assert "pseudonym" in (outcomes[1][1] or "")
    tallies = store.all_tallies("c1")
    assert tallies[OVERALL] == Tally(3, (1, 0, 1, 1))
    assert tallies[("country", "NL")] == Tally(2, (1, 0, 1, 0))
    assert tallies[("country", "DE")] == Tally(1, (0, 0, 0, 1))
    assert store.get_campaign("c1").n_reports == store.count_reports("c1") == 3


def test_ingest_refuses_unknown_and_closed_campaigns(database_target: str | Path) -> None:
    store = make_store(database_target)
    with pytest.raises(UnknownCampaign):
        ingest(store, [row(1)], campaign_id="nope")
    closed = store.close_campaign("c1")
    assert closed.status == "closed" and closed.closed_at
    assert store.close_campaign("c1").closed_at == closed.closed_at  # idempotent
    with pytest.raises(CampaignClosed, match="closed"):
        ingest(store, [row(1)])
    assert store.count_reports("c1") == 0


def test_a_conflict_is_run_again_up_to_the_attempts_in_limits_and_another_failure_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("deniable.aggregator.store.time.sleep", lambda _seconds: None)
    store = Store(tmp_path / "db.sqlite3")
    runs: list[bool] = []

    def fails(retry: bool) -> Callable[[object], None]:
        def work(_conn: object) -> None:
            runs.append(retry)
            raise StoreUnavailable("conflict" if retry else "broken", retry=retry)

        return work

    with pytest.raises(StoreUnavailable, match="conflict"):
        store.retrying(fails(True))
    assert len(runs) == CONFLICT_RETRY_ATTEMPTS  # the first run included
    runs.clear()
    with pytest.raises(StoreUnavailable, match="broken"):
        store.retrying(fails(False))
    assert runs == [False]
    store.close()


def test_a_failed_transaction_stores_nothing(database_target: str | Path) -> None:
    store = make_store(database_target)
    bad = ReportRow("0" * 32, "0" * 64, {"country": "NL"}, "0", (K + 5,))  # support out of range
    with pytest.raises(IndexError):
        ingest(store, [row(1), bad])
    assert store.count_reports("c1") == 0
    assert store.all_tallies("c1") == {}
    assert ingest(store, [row(1)]) == [("accepted", None)]  # the connection is usable again


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.lists(
            st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, K - 1), st.sampled_from("AB")),
            max_size=12,
        ),
        max_size=5,
    )
)
def test_tallies_always_equal_a_recount(database_target: str | Path, batches: list) -> None:
    _EXAMPLES[0] += 1
    campaign = f"p{_EXAMPLES[0]}"  # one store per test, one campaign per example
    store = _STORES.get(str(database_target)) or make_store(database_target, campaign_id="c0")
    _STORES[str(database_target)] = store
    make_store(database_target, campaign_id=campaign, store=store)
    for batch in batches:
        rows = [
            ReportRow(f"{rid:032x}", f"{dev:064x}", {"country": c}, json.dumps(v), (v,)) for rid, dev, v, c in batch
        ]
        ingest(store, rows, campaign_id=campaign)
    expected: dict[tuple[str, str], list[int]] = {}
    for _, groups, report_json in store.iter_reports(campaign):
        v = json.loads(report_json)
        for key in (OVERALL, ("country", groups["country"])):
            counts = expected.setdefault(key, [0] * (K + 1))
            counts[v] += 1
            counts[K] += 1
    assert store.all_tallies(campaign) == {key: Tally(c[K], tuple(c[:K])) for key, c in expected.items()}
    assert store.get_campaign(campaign).n_reports == store.count_reports(campaign)


_EXAMPLES = [0]
_STORES: dict[str, Store] = {}


# ---------------------------------------------------------------------------------------------- rounds


def test_a_device_counts_once_per_round_and_each_round_has_its_own_tallies(database_target: str | Path) -> None:
    store = make_store(database_target)
    device = "d" * 64
    outcomes = ingest(
        store,
        [
            row(1, value=1, pseudonym=device, round="w1"),
            row(2, value=2, pseudonym=device, round="w1"),  # the same device again in w1
            row(3, value=1, pseudonym=device, round="w2"),  # the next round: counted
            row(4, value=3, round="w2"),
        ],
    )
    assert [status for status, _ in outcomes] == ["accepted", "duplicate", "accepted", "accepted"]
    assert "once per round" in str(outcomes[1][1])
    assert ingest(store, [row(3, value=1, pseudonym=device, round="w3")])[0] == (
        "duplicate", "this report_id is already stored; the retry changes nothing",
    )  # fmt: skip  # a device's report ids stay unique per campaign, across rounds
    assert store.rounds("c1") == [("w1", 1), ("w2", 2)]
    assert store.all_tallies("c1", round="w1")[OVERALL] == Tally(1, (0, 1, 0, 0))
    assert store.all_tallies("c1", round="w2")[OVERALL] == Tally(2, (0, 1, 0, 1))
    assert store.all_tallies("c1") == {}  # nothing in the round '' of non-recurring reports
    assert store.get_campaign("c1").n_reports == store.count_reports("c1") == 3


def test_migration_to_rounds_keeps_the_reports_of_a_version_1_database(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, MIGRATIONS[:1]) == 1  # the schema as released before rounds
    conn.execute("INSERT INTO campaigns (id, config_json, created_at, n_reports) VALUES ('c1', ?, 'then', 2)",
                 (json.dumps({"id": "c1", "group_fields": ["country"]}),))  # fmt: skip
    for i, value in ((1, 0), (2, 2)):
        conn.execute(
            "INSERT INTO reports VALUES ('c1', ?, ?, '{\"country\":\"NL\"}', ?, '2026-11-01')",
            (bytes([i]) * 16, bytes([i]) * 32, json.dumps(value)),
        )
    for field, value in (("", ""), ("country", "NL")):
        conn.execute("INSERT INTO tallies VALUES ('c1', ?, ?, 2, '[1,0,1,0]')", (field, value))
    conn.close()

    store = Store(path)  # migrates to the current version
    assert store.connection().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 2
    both = Tally(2, (1, 0, 1, 0))
    assert store.all_tallies("c1") == {OVERALL: both, ("country", "NL"): both}
    assert store.rounds("c1") == [("", 2)]
    assert sorted(r for r, _, _ in store.iter_reports("c1", round="")) == [f"{1:02x}" * 16, f"{2:02x}" * 16]
    # the old device may not count twice, the old report ids stay known
    old_id = ReportRow(bytes([2]).hex() * 16, bytes([2]).hex() * 32, {"country": "NL"}, "0", (0,))
    outcomes = ingest(store, [row(9, pseudonym=bytes([1]).hex() * 32), old_id])
    assert [status for status, _ in outcomes] == ["duplicate", "duplicate"]


def test_duplicate_lookups_are_index_seeks_whatever_the_table_size(tmp_path: Path) -> None:
    """Ingest checks report ids and (round, pseudonym) pairs by seeking the unique indexes; a lookup that
    cannot use them scans the campaign's reports on every batch and makes ingestion O(n) per batch."""
    store = make_store(tmp_path)
    ingest(store, [row(i) for i in range(50)])
    statements: list[str] = []
    conn = store.connection()
    conn.set_trace_callback(statements.append)
    try:
        ingest(store, [row(100 + i, round="") for i in range(10)])
    finally:
        conn.set_trace_callback(None)
    lookups = [s for s in statements if s.lstrip().upper().startswith("SELECT") and "FROM reports" in s]
    assert lookups, statements
    for sql in lookups:
        plan = " ".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "report_id=?" in plan or "pseudonym=?" in plan, (sql, plan)


# ------------------------------------------------------------------------------------------ PostgreSQL


def _sqlite_schema(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    schema = {}
    for table in tables:
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        columns = sorted(r[1] for r in info)
        key = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        schema[table] = (columns, key)
    conn.close()
    return schema


def _postgres_schema(conn: object) -> dict[str, tuple[list[str], list[str]]]:
    rows = conn.execute(  # type: ignore[attr-defined]
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
    ).fetchall()
    keys = conn.execute(  # type: ignore[attr-defined]
        "SELECT tc.table_name, kcu.column_name FROM information_schema.table_constraints tc"
        " JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name"
        " AND kcu.table_schema = tc.table_schema WHERE tc.constraint_type = 'PRIMARY KEY'"
        " AND tc.table_schema = current_schema() ORDER BY tc.table_name, kcu.ordinal_position"
    ).fetchall()
    schema: dict[str, tuple[list[str], list[str]]] = {}
    for table, column in rows:
        schema.setdefault(table, ([], []))[0].append(column)
    for table, column in keys:
        schema[table][1].append(column)
    return {table: (sorted(columns), key) for table, (columns, key) in schema.items() if table != "deniable_schema"}


def test_postgres_schema_has_the_tables_columns_and_keys_of_a_migrated_sqlite_file(
    tmp_path: Path, pg_url: str
) -> None:
    """PostgreSQL starts from a baseline instead of replaying versions 1 to 10; the baseline plus the later
    migrations must leave the same tables, columns and primary keys as the SQLite path."""
    Store(tmp_path / "db.sqlite3").close()
    store = Store(pg_url)
    sqlite_schema = _sqlite_schema(tmp_path / "db.sqlite3")
    sqlite_schema.pop("sqlite_sequence", None)
    assert _postgres_schema(store.connection()) == sqlite_schema


def test_postgres_migrate_is_idempotent_refuses_a_newer_schema_and_rolls_back_a_failure(pg_url: str) -> None:
    import psycopg

    from deniable.aggregator.database import PostgresConnection
    from deniable.aggregator.migrations import schema_version

    Store(pg_url).close()
    store = Store(pg_url)  # a second instance starting applies nothing twice
    conn = store.connection()
    assert isinstance(conn, PostgresConnection)
    assert schema_version(conn) == SCHEMA_VERSION
    broken = (*MIGRATIONS, ("CREATE TABLE a (x INTEGER)", "CREATE TABLE a (x INTEGER)"))
    with pytest.raises(psycopg.errors.DuplicateTable):
        migrate(conn, broken)
    assert schema_version(conn) == SCHEMA_VERSION
    assert conn.execute("SELECT to_regclass('a')").fetchone()[0] is None  # transactional DDL: nothing left
    conn.execute("UPDATE deniable_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(RuntimeError, match="newer than this deniable"):
        migrate(conn)


def test_a_report_inserted_by_a_concurrent_transaction_counts_once(pg_url: str) -> None:
    """The lookups of a batch cannot see a report a concurrent, not yet committed transaction inserted;
    the insert's ON CONFLICT then skips it, the batch is rolled back and classified again: duplicate."""
    import threading

    store = make_store(pg_url)
    other = Store(pg_url)  # another instance
    conn = other.connection()
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO reports (campaign_id, report_id, round, pseudonym, groups_json, report_json, received_day)"
        " VALUES ('c1', ?, '', ?, '{}', '0', '2026-12-01')",
        (bytes.fromhex(f"{1:032x}"), bytes.fromhex(f"{1:064x}")),
    )
    outcome: list[list[tuple[str, str | None]]] = []
    racer = threading.Thread(target=lambda: outcome.append(ingest(store, [row(1), row(2)])))
    racer.start()
    racer.join(1.0)
    assert racer.is_alive()  # waiting on the uncommitted row's unique key
    conn.execute("COMMIT")
    racer.join(30)
    assert [status for status, _ in outcome[0]] == ["duplicate", "accepted"]
    assert store.count_reports("c1") == 2
    # the tallies count the reports the batch stored (the row inserted by hand has no tally: 1 of 2)
    assert store.all_tallies("c1")[OVERALL].n == 1


def test_instances_add_to_their_own_tally_shards_and_readers_sum_them(pg_url: str) -> None:
    from deniable.aggregator.database import PG_TALLY_SHARDS

    store = make_store(pg_url)
    instances = [Store(pg_url) for _ in range(6)]
    for i, instance in enumerate(instances):
        instance.connection().shard = i % PG_TALLY_SHARDS  # type: ignore[attr-defined]
        assert ingest(instance, [row(10 * i + j, value=j % K) for j in range(10)]) == [("accepted", None)] * 10
    shards = store.connection().execute(
        "SELECT COUNT(*) FROM tally_shards WHERE campaign_id = 'c1' AND group_field = ''"
    ).fetchone()[0]
    assert shards == len(instances)  # one row per writing connection, none shared
    assert store.all_tallies("c1")[OVERALL] == Tally(60, (18, 18, 12, 12))
    assert store.get_campaign("c1").n_reports == 60
    assert store.arrivals("c1")[0][1] == 60


def test_a_shuffled_batch_is_stored_once_on_both_backends(database_target: str | Path) -> None:
    store = make_store(database_target)
    batch_id = "ab" * 16
    assert store.ingest_batch("c1", batch_id, 3, [row(1), row(2)], k=K) == ("accepted", 2)
    assert store.ingest_batch("c1", batch_id, 3, [row(1), row(2)], k=K) == ("duplicate", 2)
    assert store.ingest_batch("c1", "cd" * 16, 2, [row(2), row(3)], k=K) == ("accepted", 1)  # row 2: once
    assert sorted(store.shuffled_batches("c1")) == [(2, 1), (3, 2)]
    assert store.count_reports("c1") == store.get_campaign("c1").n_reports == 3


def test_an_admission_token_is_spent_once_on_both_backends(database_target: str | Path) -> None:
    import dataclasses

    store = make_store(database_target)
    nonce = b"\x01" * 32
    first, second = (dataclasses.replace(row(i), token_nonce=nonce) for i in (1, 2))
    assert [status for status, _ in ingest(store, [first, second])] == ["accepted", "rejected"]
    assert ingest(store, [dataclasses.replace(row(3), token_nonce=nonce)])[0][0] == "rejected"
    assert ingest(store, [first])[0][0] == "duplicate"  # the retry of the report that spent it
    assert store.spent_token_count("c1") == 1 and store.count_reports("c1") == 1
