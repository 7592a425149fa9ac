"""The prompt hook on a vault with no index at all and no server (issue 26).

    python -m benchmarks.no_index --notes 1000            # the issue's size
    python -m benchmarks.no_index --notes 1000 10000      # and a large vault, where the scan is bounded

A generated vault (benchmarks/fixtures.py) that was never indexed, as a fresh vault or a deleted state
dir leaves it: the installed hook (``python -S .../hookentry.py hook prompt``, autostart off, the
default deadline) answers each question by scanning the notes (search/scan.py, bounded to a third of
the deadline). Its detached rebuild is held off for the run (its once-per-10-minutes marker is fresh),
so every prompt meets the same vault. Then the vault is indexed lexically and the same prompts are
asked again: the answer a lexical index gives, for comparison.

Per vault size and mode: wall p50/p95 and the hook process's CPU seconds, how many prompts injected
something and how many held the question's gold note, partial scans, and "late" (slower than the
hook's deadline). Writes ``benchmarks/results/no_index.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import (
    enable_bytecode_cache,
    git_commit,
    hook_argv,
    hook_env,
    latency_summary,
    load_average,
    log,
    make_console,
    print_table,
    run_process,
    temp_dir,
    temp_state_dir,
    write_result,
)

NAME = "no_index"
AGENT = "claude-code"


def _context(stdout: str) -> str:
    if not stdout.strip():
        return ""
    out = json.loads(stdout.strip().splitlines()[-1])
    return str((out.get("hookSpecificOutput") or {}).get("additionalContext") or "")


def _prompts(vault: Path, questions: list[dict[str, Any]], deadline: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for q in questions:
        env = hook_env(vault, str(q.get("agent") or AGENT))
        env["HIVE_BRAIN_AUTOSTART"] = "0"
        payload = json.dumps({"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": q["question"],
                              "cwd": "/"})
        r = run_process(hook_argv(), input_text=payload, env=env, timeout=60)
        ctx = _context(r.stdout) if r.returncode == 0 else ""
        gold = list(q.get("gold_docs") or [])
        rows.append({"seconds": r.seconds, "cpu_s": r.cpu_s, "injected": bool(ctx.strip()),
                     "gold": any(g in ctx for g in gold), "header": ctx.splitlines()[0] if ctx else ""})
    lat = latency_summary([r["seconds"] for r in rows])
    cpu = sorted(r["cpu_s"] for r in rows)
    return {"prompts": len(rows), "latency": lat, "cpu_p50_s": round(cpu[len(cpu) // 2], 3),
            "injected": sum(r["injected"] for r in rows), "gold": sum(r["gold"] for r in rows),
            "late": sum(r["seconds"] > deadline for r in rows), "rows": rows}


def _partial_scans(vault: Path, questions: list[dict[str, Any]]) -> int:
    """How many of the questions' scans stop at the hook's budget (in this process, the notes cached)."""
    from hive_brain.config import resolve
    from hive_brain.search.recall import search
    from hive_brain.search.view import INDEX_NONE, hook_scan_budget, scan_view
    from hive_brain.store.vault import open_vault

    settings = resolve(vault=str(vault))
    view = scan_view(open_vault(settings), settings, INDEX_NONE, budget_s=hook_scan_budget(settings))
    return sum(bool(search(view, q["question"], agent=q.get("agent"), semantic=False)["scan"]["partial"])
               for q in questions)


def run_size(notes: int, n_prompts: int) -> dict[str, Any]:
    from . import fixtures

    with temp_dir("hive-brain-noindex-") as tmp, temp_state_dir():
        vault = tmp / "vault"
        gen = fixtures.generate(vault, notes, queries=n_prompts)
        questions = gen["questions"][:n_prompts]
        from hive_brain.config import default, resolve
        from hive_brain.store.vault import open_vault

        deadline = float(default("hook_deadline"))
        state = open_vault(resolve(vault=str(vault))).state
        # The hook asks for a detached rebuild at most once per 10 minutes: a fresh marker holds it off.
        (state / "hooks").mkdir(parents=True, exist_ok=True)
        (state / "hooks" / "rebuild-requested").touch()
        log(f"no_index: {notes} notes, no index: {n_prompts} prompts")
        scan = _prompts(vault, questions, deadline)
        scan["partial"] = _partial_scans(vault, questions)
        from hive_brain.engine import Engine

        t0 = time.perf_counter()
        Engine.open(vault).rebuild(embed=False)
        log(f"no_index: indexed lexically in {time.perf_counter() - t0:.1f}s; the same prompts")
        lexical = _prompts(vault, questions, deadline)
    return {"notes": notes, "deadline_s": deadline, "scan": scan, "lexical": lexical}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.no_index", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, nargs="+", default=[1000])
    ap.add_argument("--prompts", type=int, default=20)
    args = ap.parse_args(argv)
    enable_bytecode_cache()
    t0 = time.perf_counter()
    load0 = load_average()
    sizes = [run_size(n, args.prompts) for n in args.notes]
    res = {"sizes": sizes, "commit": git_commit(), "load_start": load0, "load_end": load_average(),
           "seconds": round(time.perf_counter() - t0, 1)}
    path = write_result(NAME, res)
    rows = []
    for s in sizes:
        for mode in ("scan", "lexical"):
            m = s[mode]
            rows.append([str(s["notes"]), "no index (scan)" if mode == "scan" else "lexical index", str(m["prompts"]),
                         str(m["injected"]), str(m["gold"]), f"{m['latency']['median_ms']:.0f}",
                         f"{m['latency']['p95_ms']:.0f}", f"{m['cpu_p50_s']:.2f}", str(m["late"]),
                         str(m["partial"]) if mode == "scan" else ""])
    print_table(f"prompt hook with no index, no server (deadline {sizes[0]['deadline_s']:g}s; load {load0} → "
                f"{res['load_end']})",
                ["notes", "index", "prompts", "injected", "gold in it", "p50 ms", "p95 ms", "CPU-s p50", "late",
                 "partial"], rows, make_console())
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
