"""Two devices, real sync engines (issue 31), the short form of ``benchmarks/sync.py``: each scenario on
a fresh pair of vaults with their own state dirs and running servers, synced by real git (always) and
by real Syncthing (when the ``syncthing`` package is installed; skipped with the reason otherwise).
After the engine settles, the harness's checks must find nothing: every acknowledged write on both
devices, conflicts listed alike and repaired alike, each index equal to its notes, the same top results,
no git marker or temp file indexed, both servers still up. ``HIVE_BRAIN_SYNC_LONG=1`` runs every
scenario on Syncthing too (the short form runs the ones only Syncthing does differently)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.sync import ENGINES, SCENARIOS, run_scenario

LONG = os.environ.get("HIVE_BRAIN_SYNC_LONG") == "1"
# Syncthing's own behaviour: a .sync-conflict copy, a hand edit racing an agent, a paused device.
SYNCTHING_SHORT = ("both-evolve", "hand-edit-vs-agent", "offline-then-back")
CASES = [("git", s) for s in SCENARIOS] + [("syncthing", s) for s in SCENARIOS if LONG or s in SYNCTHING_SHORT]


@pytest.mark.parametrize(("engine", "scenario"), CASES, ids=[f"{e}-{s}" for e, s in CASES])
def test_two_devices_converge_with_nothing_lost(engine: str, scenario: str, tmp_path: Path) -> None:
    why = ENGINES[engine].available()
    if why:
        pytest.skip(why)
    row = run_scenario(tmp_path, engine, scenario)
    assert row["writes"] > 0 and row["lost"] == 0, row
    assert row["violations"] == [], row
