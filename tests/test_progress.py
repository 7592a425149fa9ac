"""Progress a person can read: per-batch counts with a total (so a rate and a time left can be shown),
and summaries in people's units."""

from __future__ import annotations

from hive_brain.cli.base import Pace, count, duration


def test_rebuild_reports_each_phase_per_batch_with_a_total(vault_path, with_model):
    from hive_brain.engine import Engine

    from .helpers import run

    # ~60 passages: several model batches (16 texts each) inside one 256-row chunk.
    recs = [{"type": "fact", "title": f"Service {i}", "content": f"Service number {i} listens on port {8000 + i} "
             f"and is owned by team {i % 7}; its runbook lives in the ops wiki page {i}."} for i in range(60)]
    for start in range(0, 60, 25):
        run("batch", "--file", "-", input=__import__("json").dumps(recs[start:start + 25]))
    calls: list[tuple[str, int, int]] = []
    res = Engine.open().rebuild(progress=lambda phase, done, total: calls.append((phase, done, total)))
    notes = [c for c in calls if c[0] == "notes"]
    passages = [c for c in calls if c[0] == "passages"]
    assert notes and notes[-1][1] == notes[-1][2] == res["indexed"]
    total = passages[-1][2]
    assert total >= 60 and all(t == total for _, _, t in passages)
    done = [d for _, d, _ in passages]
    assert done == sorted(done) and done[-1] == total
    assert len(set(done)) >= 3, done  # it moved more than once inside the chunk: a rate can be measured
    assert res["vectors"]["embedded"] == total and res["vectors"]["seconds"] > 0
    assert res["totalSeconds"] >= res["seconds"]


def test_pace_gives_a_rate_and_time_left_from_the_second_report():
    p = Pace("passages")
    assert p.update(16, 1000, now=100.0) == ""  # the first report only starts the clock (model loading is not work)
    assert p.update(116, 1000, now=110.0) == "10.0 passages/s, 1 min 28 s left"
    assert p.update(1000, 1000, now=198.4) == "10.0 passages/s"  # done: no time left shown


def test_people_read_counts_and_durations():
    assert count(2002) == "2,002" and count(7115) == "7,115" and count(12) == "12"
    assert [duration(s) for s in (0.34, 9.44, 61, 252, 1860, 7500)] == [
        "340 ms", "9.4 s", "1 min 1 s", "4 min 12 s", "31 min", "2 h 5 min"]
