"""A bounded load test (issue 16): writers, readers, the server indexing, an editor and the prompt hook.

For a fixed duration, against one generated vault with ``hive-brain serve`` running (embedding in
the background when the model pack is installed):

- **N writers**: processes running ``hive-brain remember`` one after another (distinct memories;
  the server takes each write); each result is an acknowledgement (``created``, or ``pending`` with
  its id: kept, applied by the next writer) or an error;
- **M readers**: processes running ``hive-brain recall`` one after another;
- **an editor**: saves notes of its own every ~0.25 s, alternating an atomic save (temp file +
  ``os.replace``, as editors do) and a plain overwrite;
- **the prompt hook**: ``hive-brain hook prompt`` as a process, one after another, its wall time
  recorded with the time it started.

Afterwards one more write applies anything pending, the server is stopped, and the checks run:
every acknowledged write is there exactly once (none lost, none twice), every editor note holds
its last save (no hand edit lost), the index equals the notes (``benchmarks.chaos.index_problems``)
and a recall finds each editor note's last save. Reported: hook latency p50/p95/max overall and per
window, how many hook runs passed the deadline, write and recall throughput, errors.

    python -m benchmarks.load [--duration 60] [--writers 2] [--readers 2] [--notes 300]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

NAME = "load"
DEFAULT_DURATION = 60.0
WINDOW_S = 10.0

# One writer: remember in a loop until the deadline; one JSON line per write.
_WRITER = r"""
import json, subprocess, sys, time
w, until = sys.argv[1], float(sys.argv[2])
i = 0
while time.time() < until:
    title = f"Load writer {w} memory {i}"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "hive_brain", "remember", "--type", "fact", "--title", title,
                        "--content", f"Writer {w} stored load fact zqload{w}n{i} under load.", "--json"],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t0
    try:
        res = json.loads(p.stdout)
    except ValueError:
        res = {"status": "error", "message": (p.stderr or p.stdout).strip()[-300:]}
    print(json.dumps({"title": title, "rc": p.returncode, "s": dt, "status": res.get("status") or res.get("error"),
                      "id": res.get("id"), "via": res.get("via"), "message": res.get("message"),
                      "traceback": "Traceback" in p.stderr}), flush=True)
    i += 1
"""

# One reader: recall in a loop until the deadline.
_READER = r"""
import json, subprocess, sys, time
r, until = sys.argv[1], float(sys.argv[2])
qs = ["which package manager do we use", "how do we deploy", "load fact under load", "what did the editor save"]
i = 0
while time.time() < until:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "hive_brain", "recall", qs[i % len(qs)], "--json"],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t0
    ok = p.returncode == 0
    try:
        hits = len(json.loads(p.stdout)["hits"])
    except (ValueError, KeyError, TypeError):
        ok, hits = False, None
    print(json.dumps({"rc": p.returncode, "s": dt, "ok": ok, "hits": hits,
                      "err": None if ok else (p.stderr or p.stdout).strip()[-300:]}), flush=True)
    i += 1
"""

HOOK_PROMPTS = ["which package manager should I use here?", "how do we deploy the web app?",
                "what did the editor save last?", "load fact from writer 0"]


class Editor(threading.Thread):
    """Saves its own notes until stopped: atomic saves and plain overwrites, alternately."""

    def __init__(self, vault: Path, stop: threading.Event, notes: int = 5, every: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.vault, self.stop, self.every = vault, stop, every
        self.paths = [vault / "Projects" / f"Load editor note {j}.md" for j in range(notes)]
        self.last: dict[Path, str] = {}
        self.saves = 0
        self.errors: list[str] = []

    def save(self, k: int) -> None:
        p = self.paths[k % len(self.paths)]
        text = f"# Editor note {k % len(self.paths)}\n\nThe editor saved zqedit{k} in save {k}.\n"
        p.parent.mkdir(parents=True, exist_ok=True)
        if k % 2 == 0:
            tmp = p.with_name(f".{p.name}.swp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, p)
        else:
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        self.last[p] = text
        self.saves += 1

    def run(self) -> None:
        k = 0
        while not self.stop.is_set():
            try:
                self.save(k)
            except OSError as e:
                self.errors.append(str(e))
            k += 1
            self.stop.wait(self.every)


class Hook(threading.Thread):
    """The prompt hook as a process, one run after another, until stopped."""

    def __init__(self, vault: Path, stop: threading.Event, t0: float) -> None:
        super().__init__(daemon=True)
        from hive_brain.agents.hooks import status_path
        from hive_brain.config import resolve

        from .common import hook_env

        self.stop, self.t0 = stop, t0
        self.status = status_path(Path(resolve().state_dir))  # where the hook records its runs
        self.env = hook_env(vault, "claude-code")
        self.cwd = vault.parent
        self.runs: list[dict[str, Any]] = []

    def run(self) -> None:
        from .common import hook_argv

        i = 0
        while not self.stop.is_set():
            payload = {"session_id": "load", "transcript_path": str(self.cwd / "none.jsonl"), "cwd": str(self.cwd),
                       "hook_event_name": "UserPromptSubmit", "prompt": HOOK_PROMPTS[i % len(HOOK_PROMPTS)]}
            start = time.perf_counter()
            p = subprocess.run(hook_argv(), input=json.dumps(payload), capture_output=True, text=True, env=self.env,
                               cwd=self.cwd, timeout=60)
            took = time.perf_counter() - start
            ctx = ""
            try:
                out = json.loads(p.stdout) if p.stdout.strip() else {}
                ctx = (out.get("hookSpecificOutput") or {}).get("additionalContext") or ""
            except ValueError:
                out = None
            try:  # the hook's own record of this run: its time from start to answer, imports excluded
                inner = json.loads(self.status.read_text(encoding="utf-8"))["last"]["prompt"]
            except (OSError, ValueError, KeyError):
                inner = {}
            self.runs.append({"at": round(start - self.t0, 2), "s": took, "rc": p.returncode, "context": bool(ctx),
                              "inner_ms": inner.get("durationMs"), "inner_mode": inner.get("mode"),
                              "mode": ctx.splitlines()[0][:60] if ctx else "", "bad_output": out is None,
                              "traceback": "Traceback" in p.stderr})
            i += 1


def _lines(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, _err = proc.communicate(timeout=600)
    rows = []
    for line in out.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            rows.append({"status": "error", "message": line[-300:], "ok": False})
    return rows


def _pctl(xs: list[float]) -> dict[str, Any]:
    from .common import latency_summary

    return latency_summary(xs) if xs else {}


def load_run(vault: Path, *, duration: float, writers: int, readers: int,
             log: Any = lambda s: None) -> dict[str, Any]:
    """The load, then the checks. The server must be running for ``vault``."""
    from .common import load_average

    stop = threading.Event()
    t0 = time.perf_counter()
    until = time.time() + duration
    env = {**os.environ, "HIVE_BRAIN_VAULT": str(vault), "HIVE_BRAIN_AUTOSTART": "0"}
    procs_w = [subprocess.Popen([sys.executable, "-c", _WRITER, str(w), str(until)], env=env, stdout=subprocess.PIPE,
                                text=True) for w in range(writers)]
    procs_r = [subprocess.Popen([sys.executable, "-c", _READER, str(r), str(until)], env=env, stdout=subprocess.PIPE,
                                text=True) for r in range(readers)]
    editor = Editor(vault, stop)
    hook = Hook(vault, stop, t0)
    editor.start()
    hook.start()
    load_mid: list[Any] = []
    while time.time() < until:
        time.sleep(min(5.0, max(0.0, until - time.time())))
        load_mid.append(load_average())
    writes = [r for p in procs_w for r in _lines(p)]
    reads = [r for p in procs_r for r in _lines(p)]
    stop.set()
    editor.join()
    hook.join()
    wall = time.perf_counter() - t0
    log(f"load: {len(writes)} writes, {len(reads)} recalls, {len(hook.runs)} hook runs, {editor.saves} editor saves")
    return {"wall_s": round(wall, 1), "writes": writes, "reads": reads, "hook": hook.runs, "editor": editor,
            "load_during": load_mid}


def check(vault: Path, run: dict[str, Any]) -> dict[str, Any]:
    """After the server stopped: nothing acknowledged lost or doubled, no hand edit lost, index = notes."""
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput
    from hive_brain.store.notes import parse_text

    from .chaos import index_problems

    eng = Engine.open()
    last = eng.memory.remember(MemoryInput(type="fact", title="Load final write", content="Applies what is pending."))
    doc = eng.doctor()
    eng.recall("load final catch-up", semantic=False)
    eng = Engine.open()
    titles: Counter[str] = Counter()
    for p in (vault / "Memory").rglob("*.md"):
        n = parse_text(p.name, p.read_text(encoding="utf-8"))
        titles[str(n.meta.get("title"))] += 1
    acked = [w for w in run["writes"] if w.get("status") in ("created", "pending")]
    lost = [w["title"] for w in acked if titles[w["title"]] == 0]
    doubled = [w["title"] for w in run["writes"] if titles[w["title"]] > 1]
    editor = run["editor"]
    edits_lost = [str(p.name) for p, text in editor.last.items() if p.read_text(encoding="utf-8") != text]
    unfound = []
    for p, text in editor.last.items():
        tok = text.split("saved ")[1].split()[0]
        hits = eng.recall(tok, semantic=False, scope="full-vault")["hits"]
        if not any(h["path"] == p.relative_to(vault).as_posix() for h in hits):
            unfound.append(tok)
    return {"acked": len(acked), "pending_acks": sum(w["status"] == "pending" for w in acked), "lost": lost,
            "doubled": doubled, "hand_edits_lost": edits_lost, "editor_saves_unfound": unfound,
            "index_problems": index_problems(eng, vault), "broken_notes": doc["problems"],
            "pending_after": len(doc["pendingWrites"]), "final_write": last.get("status")}


def summarize(run: dict[str, Any], checks: dict[str, Any], *, duration: float, deadline: float,
              baseline: list[float]) -> dict[str, Any]:
    hook = run["hook"]
    windows = []
    for start in range(0, int(duration + WINDOW_S), int(WINDOW_S)):
        xs = [h for h in hook if start <= h["at"] < start + WINDOW_S]
        if xs:
            s = _pctl([h["s"] for h in xs])
            inner = _pctl([h["inner_ms"] / 1000 for h in xs if h["inner_ms"] is not None])
            windows.append({"from_s": start, "runs": len(xs), "p50_ms": s["median_ms"], "p95_ms": s["p95_ms"],
                            "max_ms": s["max_ms"], "inner_p50_ms": inner.get("median_ms"),
                            "inner_max_ms": inner.get("max_ms")})
    base = sorted(baseline)[len(baseline) // 2] if baseline else 0.0
    writes, reads = run["writes"], run["reads"]
    statuses = Counter(str(w.get("status")) for w in writes)
    return {
        "load_s": duration, "wall_s": run["wall_s"],
        "hook": {"runs": len(hook), **_pctl([h["s"] for h in hook]), "with_memory": sum(h["context"] for h in hook),
                 "inner": _pctl([h["inner_ms"] / 1000 for h in hook if h["inner_ms"] is not None]),
                 "inner_over_deadline": sum((h["inner_ms"] or 0) > deadline * 1000 + 50 for h in hook),
                 "inner_modes": dict(Counter(str(h["inner_mode"]) for h in hook)),
                 "over_deadline_plus_start": sum(h["s"] > deadline + base + 0.5 for h in hook),
                 "deadline_s": deadline, "python_start_p50_ms": round(base * 1000, 1),
                 "nonzero_exit": sum(h["rc"] != 0 for h in hook), "tracebacks": sum(h["traceback"] for h in hook),
                 "bad_output": sum(h["bad_output"] for h in hook), "modes": dict(Counter(h["mode"] for h in hook)),
                 "windows": windows},
        "writes": {"n": len(writes), "statuses": dict(statuses), "per_s": round(len(writes) / max(run["wall_s"], 1e-9), 2),
                   **_pctl([w["s"] for w in writes]), "via": dict(Counter(str(w.get("via")) for w in writes)),
                   "errors": [w.get("message") for w in writes if w.get("status") not in ("created", "pending")][:10],
                   "tracebacks": sum(bool(w.get("traceback")) for w in writes)},
        "reads": {"n": len(reads), "errors": sum(not r.get("ok") for r in reads),
                  "per_s": round(len(reads) / max(run["wall_s"], 1e-9), 2), **_pctl([r["s"] for r in reads]),
                  "error_examples": [r.get("err") for r in reads if not r.get("ok")][:5]},
        "editor": {"saves": run["editor"].saves, "errors": run["editor"].errors[:5]},
        "load_during": run["load_during"],
        "checks": checks,
    }


def run(cfg: Any, *, duration: float = DEFAULT_DURATION, writers: int = 2, readers: int = 2, notes: int = 300) -> dict[str, Any]:
    from hive_brain.config import resolve
    from hive_brain.engine import Engine

    from . import fixtures
    from .common import embedding_pack, load_average, log, model_dir, running_server, temp_dir, temp_state_dir

    pack, _why = embedding_pack()
    with temp_state_dir("hive-brain-load-"), temp_dir("hive-brain-load-") as tmp, model_dir(pack):
        vault = tmp / "vault"
        os.environ["HIVE_BRAIN_VAULT"] = str(vault)
        os.environ["HIVE_BRAIN_AUTOSTART"] = "0"
        log(f"load: building a {notes}-note vault")
        fixtures.generate(vault, notes, queries=1)
        eng = Engine.open(vault)
        eng.rebuild(embed=False)
        state = eng.vault.state
        baseline = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            baseline.append(time.perf_counter() - t)
        load0 = load_average()
        with running_server(vault, state) as srv:
            log(f"load: server up in {srv['start_s']} s; {writers} writers, {readers} readers, editor, hook for {duration:g} s")
            res = load_run(vault, duration=duration, writers=writers, readers=readers, log=log)
        checks = check(vault, res)
        out = summarize(res, checks, duration=duration, deadline=float(resolve().hook_deadline), baseline=baseline)
        out.update(writers=writers, readers=readers, notes=notes, model=str(pack) if pack else None,
                   load_average_start=load0, load_average_end=load_average())
        out["ok"] = ok(out)
    return out


def report(result: dict[str, Any], console: Any) -> None:
    from .common import print_table

    h, w, r, c = result["hook"], result["writes"], result["reads"], result["checks"]
    print_table(f"Load: {result['writers']} writers, {result['readers']} readers, editor, server, hook for "
                f"{result['load_s']:g} s ({result['notes']} notes; load {result['load_average_start']} -> "
                f"{result['load_average_end']})",
                ["hook runs", "p50 ms", "p95 ms", "max ms", "in-hook p50/max ms", f"in-hook > {h['deadline_s']}s",
                 "with memory", "writes (per s)", "acked", "recalls (errors)", "editor saves"],
                [[h["runs"], h.get("median_ms"), h.get("p95_ms"), h.get("max_ms"),
                  f"{h['inner'].get('median_ms')}/{h['inner'].get('max_ms')}", h["inner_over_deadline"],
                  h["with_memory"], f"{w['n']} ({w['per_s']})", sum(v for k, v in w["statuses"].items()
                                                                   if k in ("created", "pending")),
                  f"{r['n']} ({r['errors']})", result["editor"]["saves"]]], console, digits=1)
    print_table(f"Hook latency over time (wall, process start included; python -c pass p50 "
                f"{h['python_start_p50_ms']} ms)", ["from s", "runs", "p50 ms", "p95 ms", "max ms", "in-hook p50 ms",
                                                    "in-hook max ms"],
                [[x["from_s"], x["runs"], x["p50_ms"], x["p95_ms"], x["max_ms"], x["inner_p50_ms"], x["inner_max_ms"]]
                 for x in h["windows"]], console, digits=1)
    print_table("After: what must hold", ["acked lost", "written twice", "hand edits lost", "editor saves not found",
                                          "index problems", "broken notes", "pending after"],
                [[len(c["lost"]), len(c["doubled"]), len(c["hand_edits_lost"]), len(c["editor_saves_unfound"]),
                  len(c["index_problems"]), len(c["broken_notes"]), c["pending_after"]]], console)


def ok(result: dict[str, Any]) -> bool:
    c, h = result["checks"], result["hook"]
    return not (c["lost"] or c["doubled"] or c["hand_edits_lost"] or c["editor_saves_unfound"] or c["index_problems"]
                or c["broken_notes"] or c["pending_after"] or h["nonzero_exit"] or h["tracebacks"]
                or h["bad_output"] or result["reads"]["errors"] or result["writes"]["tracebacks"])


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    from .common import summary_row

    h = result["hook"]
    return [summary_row(NAME, "hook under load", "p95 ms", h.get("p95_ms"), target="within deadline",
                        status="pass" if not h["over_deadline_plus_start"] else "FAIL"),
            summary_row(NAME, "writes under load", "acked lost", len(result["checks"]["lost"]), target="0",
                        status="pass" if ok(result) else "FAIL")]


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--duration", type=float, default=DEFAULT_DURATION, help="seconds of load")
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--notes", type=int, default=300, help="notes in the generated vault")


if __name__ == "__main__":
    from .common import standalone_main

    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"duration": a.duration, "writers": a.writers,
                                                         "readers": a.readers, "notes": a.notes}))
