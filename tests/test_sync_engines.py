"""Two devices, real sync engines (issue 31), the short form of ``benchmarks/sync.py``: two vaults with
their own state dirs and running servers, the laptop's agent writing through the CLI and the desktop's
through an MCP session (``hive-brain mcp``, the SDK's stdio client), synced by real git (always) and by
real Syncthing (when the ``syncthing`` package is installed; skipped with the reason otherwise). After
the engine settles, the harness's checks must find nothing: every acknowledged write on both devices,
conflicts listed alike and repaired alike, each index equal to its notes, the same top results, no git
marker or temp file indexed, both servers still up. ``HIVE_BRAIN_SYNC_LONG=1`` runs every scenario on
Syncthing too (the short form runs the ones only Syncthing does differently).

The scenarios of one engine run one after another on the same pair (the benchmark gives each a fresh
one): starting two servers and two Syncthing instances per scenario was most of the short form's time.
Every memory an earlier scenario acknowledged must still be there after each later one. A scenario
that found something wrong leaves its pair behind: the next one starts on a fresh pair."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.sync import ENGINES, SCENARIOS, Run

LONG = os.environ.get("HIVE_BRAIN_SYNC_LONG") == "1"
# Syncthing's own behaviour: a .sync-conflict copy, a hand edit racing an agent, a paused device.
SYNCTHING_SHORT = ("both-evolve", "hand-edit-vs-agent", "offline-then-back")
CASES = [("git", s) for s in SCENARIOS] + [("syncthing", s) for s in SCENARIOS if LONG or s in SYNCTHING_SHORT]


class Pairs:
    """The open pair of the engine in use; one engine's pair is closed before the next one's starts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run: Run | None = None
        self.engine = ""
        self.made = 0

    def get(self, engine: str) -> Run:
        if self.run is not None and self.engine != engine:
            self.close()
        if self.run is None:
            self.made += 1
            run = Run(self.root / f"{engine}-{self.made}", engine)
            try:
                run.__enter__()
            except BaseException:
                run.__exit__(None, None, None)  # what did start (a server, a Syncthing) is not left running
                raise
            self.run, self.engine = run, engine
        return self.run

    def close(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            run.__exit__(None, None, None)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pairs]:
    p = Pairs(tmp_path_factory.mktemp("sync-pairs"))
    try:
        yield p
    finally:
        p.close()


@pytest.mark.parametrize(("engine", "scenario"), CASES, ids=[f"{e}-{s}" for e, s in CASES])
def test_two_devices_converge_with_nothing_lost(engine: str, scenario: str, pairs: Pairs) -> None:
    why = ENGINES[engine].available()
    if why:
        pytest.skip(why)
    run = pairs.get(engine)
    try:
        row = run.scenario(scenario)
    except BaseException:
        pairs.close()
        raise
    if row["violations"] or row["lost"]:
        pairs.close()
    assert row["writes"] > 0 and row["lost"] == 0, row
    # The desktop's agent writes through a real MCP session (all but the undo, where only the laptop writes).
    assert row["mcpWrites"] > 0 or scenario == "undo-old-version", row
    # The laptop deleted what the desktop updated: the sync brings it back, and the laptop's doctor names it.
    assert row["toldBack"] == (scenario == "delete-vs-update"), row
    assert row["violations"] == [], row
