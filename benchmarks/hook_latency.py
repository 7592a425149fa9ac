"""The prompt hook with the server up, as a user runs it, beside the interpreter floor, interleaved.

    python -m benchmarks.hook_latency --work /tmp/scalework --notes 10000     # the vault scale.py --work kept
    python -m benchmarks.hook_latency --vault ~/brain --questions q.txt      # any vault, one question a line

Each round runs, in turn: ``python -c pass``, ``python -S -c pass`` (the floor of the installed hook's
interpreter), the hook exactly as ``hooks install`` writes it (``python -S .../hookentry.py hook
prompt``, hook JSON on stdin), the same with a transcript in the payload (Claude Code always sends
one: the hook then also reads the reply before the prompt, and a short prompt gets a second search),
the older ``python -m hive_brain hook prompt`` form (``--legacy``), and the server's ``prompt`` op alone (one request from this process: the server's share of the hook).
Round-robin, so load drift hits every row alike; medians and p95 in ms, each row's median as a
multiple of ``python -c pass``, and the median CPU time of each process itself (user + system, from
``wait4``: the part of a hook's cost a busy machine does not inflate as much as wall time). The vault's server is started when it is not running and stopped
after. Writes
``benchmarks/results/hook_latency.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
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
    running_server,
    state_dir_at,
    temp_dir,
    wait_server_idle,
    write_result,
)

NAME = "hook_latency"
AGENT = "claude-code"
FLOOR = "python -c pass"


# The end of a Claude Code transcript: the reply before the prompt, which the hook reads to resolve
# what a short prompt refers to (a second search when the first leaves room). Claude Code sends
# `transcript_path` with every prompt.
REPLY = ("I updated the settings loader so an unknown key is reported with the file and line, added two "
         "tests for it, and ran the suite: 212 passed. Next I can either split the command-line parser into "
         "its own module or look at why the nightly job timed out on the integration stage. Which one first?")


def _transcript(folder: Path) -> Path:
    path = folder / "transcript.jsonl"
    turns = [{"type": "user", "message": {"role": "user", "content": "make the settings loader report bad keys"}},
             {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": REPLY}]}}]
    path.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
    return path


def _payload(q: str, transcript: Path | None = None) -> str:
    return json.dumps({"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": q, "cwd": "/",
                       **({"transcript_path": str(transcript)} if transcript else {})})


def _context(stdout: str) -> str:
    if not stdout.strip():
        return ""
    doc = json.loads(stdout.strip().splitlines()[-1])
    return str((doc.get("hookSpecificOutput") or {}).get("additionalContext") or "")


def measure(vault: Path, state: Path, questions: Sequence[str], *, rounds: int, legacy: bool,
            transcript: Path | None = None) -> dict[str, Any]:
    """Interleaved rounds against the running server of ``vault`` (state dir ``state``); with
    ``transcript``, one more hook row whose payload names it, as Claude Code's does."""
    from hive_brain.rpc import client

    env = hook_env(vault, AGENT)
    py = sys.executable
    procs: dict[str, list[str]] = {FLOOR: [py, "-c", "pass"], "python -S -c pass": [py, "-S", "-c", "pass"],
                                   "hook, server up (installed form)": hook_argv()}
    if transcript is not None:
        procs["hook, server up, with the transcript"] = hook_argv()
    if legacy:
        procs["hook, server up (python -m hive_brain hook prompt)"] = [py, "-m", "hive_brain", "hook", "prompt"]
    times: dict[str, list[float]] = {k: [] for k in [*procs, "server prompt op alone"]}
    cpu: dict[str, list[float]] = {k: [] for k in procs}
    injected: dict[str, int] = {k: 0 for k in procs if k.startswith("hook")}
    modes: dict[str, int] = {}
    stages: dict[str, list[float]] = {}

    def op(q: str) -> float:
        t0 = time.perf_counter()
        res = client.call(state, "prompt", {"prompt": q, "budget": 6000, "agent": AGENT}, timeout=10)
        dt = time.perf_counter() - t0
        modes[str(res.get("mode"))] = modes.get(str(res.get("mode")), 0) + 1
        for k, v in (res.get("timing") or {}).items():
            stages.setdefault(k, []).append(float(v))
        return dt

    def hook(name: str, argv: list[str], q: str) -> tuple[Any, bool]:
        r = run_process(argv, input_text=_payload(q, transcript if "transcript" in name else None), env=env, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[-3:])} exited {r.returncode}: {r.stderr.strip()[-300:]}")
        return r, bool(_context(r.stdout))

    for q in questions[:2]:  # untimed: bytecode caches, the server's first requests
        for argv in procs.values():
            run_process(argv, input_text=_payload(q), env=env, timeout=30)
        op(q)
    for i in range(rounds):
        q = questions[i % len(questions)]
        for name, argv in procs.items():
            if name.startswith("hook"):
                r, inj = hook(name, argv, q)
                injected[name] += inj
            else:
                r = run_process(argv, env=env)
            times[name].append(r.seconds)
            cpu[name].append(r.cpu_s or 0.0)
        times["server prompt op alone"].append(op(q))
    floor = latency_summary(times[FLOOR])["median_ms"]
    rows = []
    for name, ts in times.items():
        lat = latency_summary(ts)
        rows.append({"system": name, "latency": lat,
                     "cpu_ms": round(sorted(cpu[name])[len(cpu[name]) // 2] * 1000, 1) if cpu.get(name) else None,
                     "x_floor": round(float(lat["median_ms"]) / float(floor), 2) if floor else None,
                     **({"injected": injected[name]} if name in injected else {})})
    # The server's own stages (its first search's, and the whole op), medians in ms
    server = {k: round(sorted(v)[len(v) // 2], 2) for k, v in stages.items()}
    return {"rows": rows, "rounds": rounds, "modes": modes, "server_stages_ms": server}


def _questions(args: argparse.Namespace) -> tuple[Path, Path | None, list[str]]:
    if args.work:
        work = Path(args.work)
        vault = work / f"vault-{args.notes}"
        fx = next(work.glob(f"fixture-{args.notes}-*.json"), None)
        if not vault.is_dir() or fx is None:
            raise SystemExit(f"{work} holds no vault-{args.notes} with its fixture file: run "
                             f"`python -m benchmarks.scale --full --sizes {args.notes}h --work {work}` first")
        states = [p for p in work.glob(f"state-{args.notes // 1000}k-hybrid") if p.is_dir()]
        qs = [q["question"] for q in json.loads(fx.read_text(encoding="utf-8"))["questions"]]
        return vault, states[0] if states else None, qs
    if not args.vault or not args.questions:
        raise SystemExit("give --work DIR (a scale.py work dir) or --vault and --questions")
    qs = [ln.strip() for ln in Path(args.questions).read_text(encoding="utf-8").splitlines() if ln.strip()]
    return Path(args.vault).expanduser(), Path(args.state).expanduser() if args.state else None, qs


def run(args: argparse.Namespace) -> dict[str, Any]:
    vault, state_root, qs = _questions(args)
    with state_dir_at(state_root) if state_root else contextlib.nullcontext():
        from hive_brain.config import resolve
        from hive_brain.store.vault import open_vault

        v = open_vault(resolve(vault=vault))
        log(f"hook_latency: server for {v.root} (state {v.state})")
        with running_server(v.root, v.state) as srv:
            wait_server_idle(v.state)
            log(f"hook_latency: server pid {srv['pid']}; {args.rounds} rounds")
            t0 = time.perf_counter()
            load0 = load_average()
            with temp_dir("hive-brain-hook-latency-") as tmp:
                res = measure(v.root, v.state, qs, rounds=args.rounds, legacy=args.legacy,
                              transcript=None if args.no_transcript else _transcript(tmp))
    res.update(vault=str(vault), commit=git_commit(), load_start=load0, load_end=load_average(),
               seconds=round(time.perf_counter() - t0, 1))
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hook_latency", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", help="a `benchmarks.scale --work` folder (its vault and state are reused)")
    ap.add_argument("--notes", type=int, default=10000, help="with --work: which vault size (default 10000)")
    ap.add_argument("--vault", help="a vault (instead of --work)")
    ap.add_argument("--state", help="with --vault: its HIVE_BRAIN_STATE_DIR (default: the usual one)")
    ap.add_argument("--questions", help="with --vault: a text file, one question a line")
    ap.add_argument("--rounds", type=int, default=40, help="timed rounds (default 40)")
    ap.add_argument("--legacy", action="store_true", help="also time `python -m hive_brain hook prompt`")
    ap.add_argument("--no-transcript", action="store_true",
                    help="leave out the row whose payload names a transcript (as Claude Code's always does)")
    args = ap.parse_args(argv)
    enable_bytecode_cache()
    res = run(args)
    path = write_result(NAME, res)
    rows = [[r["system"], f"{r['latency']['median_ms']:.1f}", f"{r['latency']['p95_ms']:.1f}", f"{r['x_floor']:.2f}",
             "–" if r.get("cpu_ms") is None else f"{r['cpu_ms']:.1f}", str(r.get("injected", "–"))] for r in res["rows"]]
    print_table(f"prompt hook latency ({res['rounds']} rounds, load {res['load_start']} → {res['load_end']})",
                ["system", "p50 ms", "p95 ms", f"× {FLOOR}", "process CPU ms (p50)", "injected"], rows, make_console())
    print("server stages (median ms): " + ", ".join(f"{k} {v:g}" for k, v in res["server_stages_ms"].items()))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
