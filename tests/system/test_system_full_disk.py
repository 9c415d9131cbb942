"""The soak's full-disk phase (`full_disk_phase`): records intact after N refusals.

Reduced in ``make test``; ``make soak`` runs the full count. Skips, saying why, where a tmpfs
cannot be mounted (`.ci/run` runs as root, so CI never skips it)."""

from __future__ import annotations

import pytest

from tests.system.daemon_process import soak_scale
from tests.system.full_disk_phase import full_disk_phase

REFUSALS = {"reduced": 12, "full": 200}


@pytest.mark.timeout(600)
async def test_records_stay_intact_through_full_disk_refusals(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    refusals = REFUSALS[soak_scale()]
    outcome = await full_disk_phase(tmp_path_factory.mktemp("full-disk-soak"), refusals)
    if outcome.skipped is not None:
        pytest.skip(outcome.skipped)
    print(outcome.summary)
    assert outcome.problems == []
    assert outcome.refusals == refusals
    assert outcome.summary == f"records intact after {refusals} full-disk refusals"
