"""Cold moments: the prompt hook when the server is not warm and idle (issue 26).

    python -m benchmarks.cold --notes 10000          # the issue's size
    python -m benchmarks.cold --quick                # 300 notes, a few prompts per moment

A generated vault (benchmarks/fixtures.py) is indexed lexically only, so the server that starts has
every passage still to embed. Then the installed hook (``python -S .../hookentry.py hook prompt``,
autostart on, the default deadline) is run as a user meets it, each hook process interleaved with
``python -c pass``:

* ``stopped``: no server (just after ``serve --stop``); the first of these prompts starts it;
* ``starting``: the server is loading (server.json written, not ready yet);
* ``embedding``: ready, still embedding passages or reading them ahead for the reranker;
* ``idle``: nothing left to do;
* ``idle+load``: idle, with a second process keeping both cores busy;
* ``restart``: right after a ``serve --stop`` of the warm server, prompts until it is ready again.

Each prompt is counted by the moment it was sent in and what it injected: hybrid (the server's
answer with vectors), lexical (any answer without vectors) or empty (nothing injected: the answer
abstained, or no answer in time); "late" counts hook processes slower than the hook's deadline; wall
p50/p95 next to the floor's. Target: no empty answer where the vault holds the memory, and hybrid from the first prompt
after ``ready``. Writes ``benchmarks/results/cold.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import (
    embedding_pack,
    enable_bytecode_cache,
    git_commit,
    hook_argv,
    hook_env,
    latency_summary,
    load_average,
    log,
    make_console,
    model_dir,
    print_table,
    run_process,
    stop_server,
    temp_dir,
    temp_state_dir,
    write_result,
)

NAME = "cold"
AGENT = "claude-code"
FLOOR = "python -c pass"
MOMENTS = ("stopped", "starting", "embedding", "idle", "idle+load", "restart")


def _spin(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10000))


def _moment(state: Path) -> str:
    from hive_brain.rpc import client

    if not client.server_ready(state):
        return "starting" if client.read_info(state) else "stopped"
    try:
        sem = client.call(state, "status", timeout=5.0).get("semantic") or {}
    except Exception:  # noqa: BLE001 - a server too busy to say is counted as still embedding
        return "embedding"
    return "embedding" if sem.get("pendingPassages") or sem.get("rerankAhead") else "idle"


def _server_cpu(state: Path) -> tuple[int | None, float | None]:
    """(pid, user + system CPU seconds so far) of the vault's server."""
    from hive_brain.rpc import client

    pid = (client.read_info(state) or {}).get("pid")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return pid, None
    return pid, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _kind(stdout: str) -> str:
    if not stdout.strip():
        return "empty"
    ctx = str((json.loads(stdout.strip().splitlines()[-1]).get("hookSpecificOutput") or {}).get("additionalContext")
              or "")
    if not ctx.strip():
        return "empty"
    return "hybrid" if "hybrid recall" in ctx.splitlines()[0] else "lexical"


def _prompt(q: str) -> str:
    return json.dumps({"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": q, "cwd": "/"})


class Recorder:
    def __init__(self, vault: Path, state: Path, questions: Sequence[str]) -> None:
        self.env = hook_env(vault, AGENT)
        self.env["HIVE_BRAIN_AUTOSTART"] = "1"
        self.state = state
        self.qs = list(questions)
        self.rows: list[dict[str, Any]] = []
        self.floor: dict[str, list[float]] = {m: [] for m in MOMENTS}
        from hive_brain.config import default

        self.deadline = float(default("hook_deadline"))

    def one(self, moment: str | None = None) -> dict[str, Any]:
        m = moment or _moment(self.state)
        f = run_process([sys.executable, "-c", "pass"], env=self.env)
        self.floor.setdefault(m, []).append(f.seconds)
        q = self.qs[len(self.rows) % len(self.qs)]
        r = run_process(hook_argv(), input_text=_prompt(q), env=self.env, timeout=60)
        row = {"moment": m, "seconds": r.seconds, "cpu_s": r.cpu_s, "kind": _kind(r.stdout) if r.returncode == 0 else "error",
               "t": time.monotonic()}
        self.rows.append(row)
        return row

    def table(self) -> list[dict[str, Any]]:
        out = []
        for m in MOMENTS:
            rs = [r for r in self.rows if r["moment"] == m]
            if not rs:
                continue
            lat = latency_summary([r["seconds"] for r in rs])
            floor = latency_summary(self.floor.get(m) or [0.0])
            out.append({"moment": m, "prompts": len(rs),
                        **{k: sum(r["kind"] == k for r in rs) for k in ("hybrid", "lexical", "empty", "error")},
                        "late": sum(r["seconds"] > self.deadline for r in rs),
                        "latency": lat, "floor": floor,
                        "x_floor": round(lat["median_ms"] / max(floor["median_ms"], 1e-6), 2)})
        return out


def _until(rec: Recorder, want: set[str], limit: int, timeout: float) -> None:
    """Prompts (each sent in the moment it finds) until the server reaches one of ``want``."""
    t_end = time.monotonic() + timeout
    n = 0
    while _moment(rec.state) not in want:
        if n >= limit:
            time.sleep(0.5)  # enough prompts of this moment: wait without them
        else:
            rec.one()
            n += 1
        if time.monotonic() > t_end:
            raise TimeoutError(f"the server did not reach {want} within {timeout:.0f}s")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from . import fixtures

    pack, why = embedding_pack()
    if pack is None:
        raise SystemExit(f"cold: needs the embedding pack ({why})")
    t0 = time.perf_counter()
    load0 = load_average()
    with temp_dir("hive-brain-cold-") as tmp, temp_state_dir(), model_dir(pack):
        vault = tmp / "vault"
        gen = fixtures.generate(vault, args.notes, queries=max(20, args.prompts))
        qs = [q["question"] for q in gen["questions"]]
        from hive_brain.config import resolve
        from hive_brain.engine import Engine
        from hive_brain.store.vault import open_vault

        Engine.open(vault).rebuild(embed=False)  # every passage left for the server to embed
        state = open_vault(resolve(vault=str(vault))).state
        rec = Recorder(vault, state, qs)
        try:
            log(f"cold: {args.notes} notes; prompts with no server (the first starts it)")
            rec.one("stopped")
            _until(rec, {"embedding", "idle"}, args.prompts * 4, 600)
            log("cold: ready; prompts while it embeds")
            from hive_brain.rpc import client

            to_embed = int((client.call(state, "status", timeout=10).get("semantic") or {}).get("pendingPassages") or 0)
            pid0, cpu0 = _server_cpu(state)
            t_embed = time.monotonic()
            _until(rec, {"idle"}, args.prompts * 2, args.embed_timeout)
            pid1, cpu1 = _server_cpu(state)
            embed = {"passages": to_embed, "wall_s": round(time.monotonic() - t_embed, 1),
                     "server_cpu_s": round(cpu1 - cpu0, 1) if cpu0 is not None and cpu1 is not None and pid0 == pid1 else None}
            if embed["server_cpu_s"]:
                embed["passages_per_cpu_s"] = round(to_embed / embed["server_cpu_s"], 1)
            log(f"cold: embedding {embed}")
            log("cold: idle; prompts quiet and loaded")
            for _ in range(args.prompts):
                rec.one("idle")
            stop = multiprocessing.Event()
            burners = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(os.cpu_count() or 2)]
            for b in burners:
                b.start()
            try:
                for _ in range(args.prompts):
                    rec.one("idle+load")
            finally:
                stop.set()
                for b in burners:
                    b.join(10)
            log("cold: serve --stop, then prompts until it is ready again")
            stop_server(state)
            rec.one("restart")
            t_end = time.monotonic() + 300
            while not client.server_ready(state) and time.monotonic() < t_end:
                rec.one("restart")
            rec.one("restart")  # the first prompt after ready
        finally:
            stop_server(state)
    return {"notes": args.notes, "prompts_per_moment": args.prompts, "moments": rec.table(), "embedding": embed,
            "prompts": rec.rows,
            "commit": git_commit(), "load_start": load0, "load_end": load_average(),
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cold", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, default=10000)
    ap.add_argument("--prompts", type=int, default=10, help="prompts per moment (the server's own pace decides "
                                                           "how many fall in 'starting' and 'embedding')")
    ap.add_argument("--embed-timeout", type=float, default=3600.0)
    ap.add_argument("--quick", action="store_true", help="300 notes, 4 prompts per moment")
    args = ap.parse_args(argv)
    if args.quick:
        args.notes, args.prompts = 300, 4
    enable_bytecode_cache()
    res = run(args)
    path = write_result(NAME, res)
    rows = [[r["moment"], str(r["prompts"]), str(r["hybrid"]), str(r["lexical"]), str(r["empty"] + r["error"]),
             f"{r['latency']['median_ms']:.0f}", f"{r['latency']['p95_ms']:.0f}", f"{r['floor']['median_ms']:.0f}",
             f"{r['x_floor']:.1f}", str(r["late"])] for r in res["moments"]]
    print_table(f"cold moments, {res['notes']} notes (load {res['load_start']} → {res['load_end']})",
                ["moment", "prompts", "hybrid", "lexical", "empty", "p50 ms", "p95 ms", f"{FLOOR} p50", "× floor", "late"],
                rows, make_console())
    log(f"embedding (reranker read-ahead and prompts included in the server's CPU): {res['embedding']}")
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
