"""A device whose database is deleted gets no free re-randomization (issue 10, item 3).

Before, a one-shot answer drew fresh CSPRNG noise: with ``state.sqlite3`` deleted and the device secret
kept, the next ``submit`` sent a new randomized report under the same pseudonym, and 200 resets let a
majority vote recover the true value from what reached the aggregator. Now the answer and its report id
are derived from the device secret (HMAC_DRBG over campaign id, config fingerprint and value), so a reset
device re-sends the identical report under the same id, and the SDK refuses to start on a secret whose
ledger is gone unless told ``reset_ledger=True``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from support.server import RunningServer

from deniable.client import Client
from deniable.client.memo import one_shot_answer
from deniable.client.state import DB_FILE, SECRET_FILE, DeviceState
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import DeniableError, LedgerLost
from deniable.shared.keys import public_key_of


def _lose_ledger(state_dir: Path) -> None:
    for name in (DB_FILE, DB_FILE + "-wal", DB_FILE + "-shm"):
        (state_dir / name).unlink(missing_ok=True)


def test_a_state_dir_whose_ledger_is_gone_is_refused_unless_reset(tmp_path: Path) -> None:
    state_dir = tmp_path / "device"
    DeviceState(state_dir).close()
    _lose_ledger(state_dir)
    for _ in range(2):  # the refusal creates nothing that would let the next start pass
        with pytest.raises(LedgerLost, match=r"reset_ledger=True") as info:
            DeviceState(state_dir)
        assert isinstance(info.value, DeniableError) and info.value.code == "ledger_lost"
        with pytest.raises(LedgerLost):
            Client("http://127.0.0.1:9", state_dir)
    state = DeviceState(state_dir, reset_ledger=True)
    assert state.ledger_reset_at() is not None and state.total_spent() == 0
    state.close()
    again = DeviceState(state_dir)  # the new ledger is a ledger: no flag needed any more
    assert again.ledger_reset_at() is not None
    again.close()


def test_a_fresh_device_and_an_existing_ledger_need_no_flag(tmp_path: Path) -> None:
    fresh = DeviceState(tmp_path / "new")
    assert fresh.ledger_reset_at() is None
    fresh.close()
    DeviceState(tmp_path / "new").close()
    (tmp_path / "lost-secret").mkdir()
    DeviceState(tmp_path / "lost-secret").close()  # no secret yet: a new device, nothing to protect


def test_a_reset_device_resends_the_identical_report(aggregator: RunningServer, tmp_path: Path) -> None:
    aggregator.create_campaign(id="reset-once", question="q?", categories=["yes", "no"], epsilon=1.0)
    state_dir = tmp_path / "device"
    sent = []
    for attempt in range(5):
        if attempt:
            _lose_ledger(state_dir)
        with Client(aggregator.url, state_dir, reset_ledger=attempt > 0) as client:
            receipt = client.submit("reset-once", "yes")
            assert receipt.epsilon_spent == 1.0 and not receipt.memoized  # the new ledger cannot know
            queued = client._state.next_batch("reset-once", 10)
            assert len(queued) == 1
            sent.append((receipt.report_id, json.loads(queued[0].envelope)["report_id"]))
            result = client.deliver()
            assert (result.accepted, result.duplicate) == ((1, 0) if attempt == 0 else (0, 1))
    assert len(set(sent)) == 1  # one report id: the aggregator sees retries of one answer
    body = aggregator.estimate("reset-once")
    assert body["n"] == 1


def _config(epsilon: float = 1.0, k: int = 4, mechanism: str = "grr", cid: str = "law") -> CampaignConfig:
    public = public_key_of(bytes(range(32)))  # a fixed key: the fingerprint, hence the draws, are fixed
    return CampaignConfig.create(
        id=cid, question="q?", categories=[f"c{i}" for i in range(k)], epsilon=epsilon, public_key=public,
        mechanism=mechanism,
    )


def test_one_shot_answers_are_a_function_of_secret_campaign_fingerprint_and_value() -> None:
    config = _config()
    secret = bytes(range(32))
    first = one_shot_answer(config, secret, 2)
    assert one_shot_answer(config, secret, 2) == first
    others = {
        one_shot_answer(config, bytes(32), 2)[0],
        one_shot_answer(config, secret, 3)[0],
        one_shot_answer(_config(cid="other"), secret, 2)[0],
        one_shot_answer(_config(epsilon=2.0), secret, 2)[0],  # same id, another fingerprint: another draw
    }
    assert first[0] not in others and len(others) == 4


@pytest.mark.parametrize(("mechanism", "k", "epsilon"), [("grr", 4, 1.0), ("binary-rr", 2, 2.0)])
def test_derived_one_shot_answers_have_the_mechanisms_law(mechanism: str, k: int, epsilon: float) -> None:
    """Over many device secrets (seeded, so the check is deterministic) the derived reports follow GRR's law."""
    config = _config(epsilon=epsilon, k=k, mechanism=mechanism)
    rng = np.random.default_rng(10)
    n, value = 4000, 1
    reports = Counter(one_shot_answer(config, rng.bytes(32), value)[1] for _ in range(n))
    weights = np.ones(k)
    weights[value] = np.exp(epsilon)
    expected = weights / weights.sum() * n
    observed = np.array([reports[v] for v in range(k)])
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_the_ledger_command_says_the_ledger_is_lost(tmp_path: Path) -> None:
    state_dir = tmp_path / "device"
    DeviceState(state_dir).close()
    _lose_ledger(state_dir)
    assert (state_dir / SECRET_FILE).exists()
    cmd = [sys.executable, "-m", "deniable.aggregator.cli", "ledger", "--state-dir", str(state_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "ledger" in done.stderr and "--reset-ledger" in done.stderr
