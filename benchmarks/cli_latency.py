"""The everyday commands as whole processes with the server up: the thin client (cli/thin.py) against the
full click CLI, beside ``python -c pass``, interleaved, quiet and with both cores busy.

    python -m benchmarks.cli_latency --notes 1000 --rounds 20            # a generated vault (fixtures.py)
    python -m benchmarks.cli_latency --work /tmp/scalework --notes 10000  # the vault scale.py --work kept
    python -m benchmarks.cli_latency --notes 1000 --busy 2                # and two busy loops meanwhile
    python -m benchmarks.cli_latency --work /tmp/w --notes 10000 --thin-only --against /tmp/base-src  # before/after

Each round runs, in turn: ``python -c pass``; ``hive-brain recall / answer / remember / update / get /
core / status ... --json`` from the installed entry point (the thin client answers them); the same
through the full CLI (``hive_brain.cli.app``, what every command cost before). Round-robin, so load drift hits every row
alike: p50/p95 wall ms, p50 as a multiple of ``python -c pass`` and each process's own CPU ms (``wait4``).
``--busy N`` keeps N processes spinning during the rounds (the loaded figures). The server is lexical unless ``--hybrid``
(what is timed is the client's process; the server's op is the same for both). It is started when it
is not running and stopped after; writes ``benchmarks/results/cli_latency.json``. "srv CPU ms" is the
server process's CPU time (all its threads, ``/proc/<pid>/task/*/schedstat``) over each command: its op,
plus whatever its indexing thread did meanwhile (a write's deferred index commit lands on a later row).

``--against DIR`` runs the same commands, in the same rounds (alternating which goes first), with
``PYTHONPATH=DIR`` (another source tree, e.g. ``git archive`` of the base commit) for client and server
alike, on a copy of the vault (``<work>/vault-N-against``, made once) with its own state and server: before
and after under the same load. Run it from outside the checkout (``cd /tmp; PYTHONPATH=<checkout> python -m
benchmarks.cli_latency ...``): ``python -m`` puts the working directory first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .common import (
    enable_bytecode_cache,
    git_commit,
    latency_summary,
    load_average,
    log,
    make_console,
    print_table,
    restore_env,
    run_process,
    running_server,
    state_dir_at,
    temp_dir,
    write_result,
)

NAME = "cli_latency"
FLOOR = "python -c pass"
FULL = "import sys\nfrom hive_brain.cli.app import main\nmain(prog_name='hive-brain', args=sys.argv[1:])\n"


def _entry() -> str:
    """The installed ``hive-brain`` script of this interpreter's environment."""
    script = Path(sys.executable).with_name("hive-brain")
    if not script.exists():
        raise SystemExit(f"no installed entry point at {script}: run ./scripts/setup")
    return str(script)


@contextlib.contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` processes spinning on a core each, stopped after (the loaded rows)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def server_cpu_s(pid: int | None) -> float:
    """CPU seconds the process's live threads have run (ns resolution, unlike utime's 10 ms ticks)."""
    total = 0
    if pid:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def measure(sides: Sequence[tuple[str, dict[str, str], int | None]], questions: Sequence[str], rounds: int, name: str,
            *, thin_only: bool = False) -> dict[str, Any]:
    """``sides``: (label suffix, environment, server pid) of each tree under test ("" for this one)."""
    entry = _entry()
    rows: dict[str, list[tuple[float, float, float]]] = {}

    def one(label: str, argv: list[str], expect: str, env: dict[str, str], pid: int | None = None) -> str:
        s0 = server_cpu_s(pid)
        r = run_process(argv, env=env, timeout=120.0)
        if r.returncode != 0 or expect not in r.stdout:
            raise SystemExit(f"{label} failed ({r.returncode}): {r.stderr.strip()[:300] or r.stdout[:300]}")
        rows.setdefault(label, []).append((r.seconds, r.cpu_s or 0.0, server_cpu_s(pid) - s0 if pid else 0.0))
        return r.stdout

    heads = (("thin", [entry]), *(() if thin_only else (("full CLI", [sys.executable, "-c", FULL]),)))
    for i in range(rounds):
        q = questions[i % len(questions)]
        one(FLOOR, [sys.executable, "-c", "pass"], "", sides[0][1])
        for side, env, pid in sides if i % 2 == 0 else sides[::-1]:
            mid = ""
            for how, head in heads:
                tag = f"{how} {name} {os.getpid()} {i}"
                how = how + side
                one(f"recall ({how})", [*head, "recall", q, "--json"], '"hits"', env, pid)
                one(f"answer ({how})", [*head, "answer", q, "--json"], '"abstained"', env, pid)
                said = one(f"remember ({how})", [*head, "remember", "--type", "fact", "--title", f"Bench {tag}",
                                              "--content", f"Benchmark write {tag} of the CLI latency run.", "--json"],
                           '"id"', env, pid)
                mid = mid or json.loads(said)["id"]
                one(f"update ({how})", [*head, "update", mid, "--tags", f"bench-{how.split()[0]}-{i}", "--json"], '"id"',
                    env, pid)
                one(f"get ({how})", [*head, "get", mid, "--json"], '"chain"', env, pid)
                one(f"core ({how})", [*head, "core", "--json"], '"text"', env, pid)
                one(f"status ({how})", [*head, "status", "--json"], '"generation"', env, pid)
    floor = latency_summary([w for w, _, _ in rows[FLOOR]])["median_ms"]
    out = {}
    for label, vals in rows.items():
        s = latency_summary([w for w, _, _ in vals])
        cpu = sorted(c for _, c, _ in vals)[len(vals) // 2] * 1000
        srv = sorted(c for _, _, c in vals)[len(vals) // 2] * 1000
        out[label] = {**s, "x_floor": round(s["median_ms"] / floor, 2) if floor else None, "cpu_ms": round(cpu, 1),
                      "server_cpu_ms": round(srv, 1)}
    return out


@contextlib.contextmanager
def against_server(args: argparse.Namespace, vault: Path, state: Path,
                   env: dict[str, str]) -> Iterator[tuple[str, dict[str, str], int | None] | None]:
    """The ``--against`` side: its vault copy, environment and running server (None without it)."""
    if not args.against:
        yield None
        return
    copy = vault.with_name(vault.name + "-against")
    if not copy.exists():
        shutil.copytree(vault, copy, symlinks=True)
    st = state.with_name(state.name + "-against")
    side_env = {**env, "HIVE_BRAIN_VAULT": str(copy), "HIVE_BRAIN_STATE_DIR": str(st),
                "PYTHONPATH": str(args.against.resolve())}
    saved = {k: os.environ.get(k) for k in side_env}
    os.environ.update(side_env)  # the server is spawned from this environment (its tree first on sys.path)
    try:
        from hive_brain.config import resolve
        from hive_brain.store.vault import open_vault

        vstate = open_vault(resolve()).state
        with running_server(copy, vstate, timeout=600.0) as info:
            restore_env(saved)
            yield " against", side_env, info.get("pid")
    finally:
        restore_env(saved)


def _vault(args: argparse.Namespace, tmp: Path) -> tuple[Path, Path, list[str]]:
    from . import fixtures

    if args.vault:
        return args.vault, Path(os.environ.get("HIVE_BRAIN_STATE_DIR") or tmp / "state"), list(args.questions or ["how do we deploy?"])
    base = args.work or tmp
    vault = base / f"vault-{args.notes}"
    saved = base / f"fixture-{args.notes}-200.json"
    if not (vault.exists() and saved.exists()):
        with state_dir_at(base / "state-generate"):
            fx = fixtures.generate(vault, args.notes, queries=200)
        saved.write_text(json.dumps(fx), encoding="utf-8")
    fx = json.loads(saved.read_text(encoding="utf-8"))
    qs = [q["question"] for q in fx.get("questions", [])][:40] or ["how do we deploy?"]
    return vault, base / f"state-cli-{args.notes}", qs


def run(args: argparse.Namespace) -> dict[str, Any]:
    enable_bytecode_cache()
    with temp_dir("hb-bench-cli-") as tmp:
        vault, state, questions = _vault(args, tmp)
        with state_dir_at(state) as st:
            env = {**os.environ, "HIVE_BRAIN_VAULT": str(vault), "HIVE_BRAIN_STATE_DIR": str(st), "HIVE_BRAIN_AUTOSTART": "0"}
            if not args.hybrid:
                env["HIVE_BRAIN_SEMANTIC"] = "0"  # the client's cost is the point; --hybrid embeds the vault first
            os.environ.update(env)
            from hive_brain.config import resolve
            from hive_brain.engine import Engine
            from hive_brain.store.vault import open_vault

            vstate = open_vault(resolve()).state
            Engine.from_settings(resolve()).indexer.catch_up(label="cli_latency")
            with running_server(vault, vstate) as info, against_server(args, vault, st, env) as other:
                sides = [("", env, info.get("pid")), *([other] if other else [])]
                load0 = load_average()
                quiet = measure(sides, questions, args.rounds, "quiet", thin_only=args.thin_only)
                loaded = None
                if args.busy:
                    with busy(args.busy):
                        loaded = measure(sides, questions, args.rounds, "loaded", thin_only=args.thin_only)
    return {"commit": git_commit(), "notes": args.notes, "hybrid": args.hybrid, "rounds": args.rounds, "busy": args.busy,
            "against": str(args.against) if args.against else None,
            "load": [load0, load_average()], "quiet": quiet, "loaded": loaded}


def report(res: dict[str, Any]) -> None:
    console = make_console()
    for key in ("quiet", "loaded"):
        rows = res.get(key)
        if not rows:
            continue
        title = f"CLI with the server up, {res['notes']:,} notes, {key}" + (f" ({res['busy']} busy loops)" if key == "loaded" else "")
        print_table(title, ["command", "p50 ms", "p95 ms", "x python -c pass", "CPU ms", "srv CPU ms"],
                    [[k, f"{v['median_ms']:.1f}", f"{v['p95_ms']:.1f}", f"{v['x_floor']:.2f}", f"{v['cpu_ms']:.1f}",
                      f"{v.get('server_cpu_ms', 0.0):.1f}"] for k, v in sorted(rows.items())], console)
    console.print(f"load average {res['load']}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cli_latency", description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--busy", type=int, default=0, help="busy loops during a second, loaded pass")
    ap.add_argument("--work", type=Path, default=None, help="keep (and reuse) the generated vault here")
    ap.add_argument("--vault", type=Path, default=None, help="an existing vault instead of a generated one")
    ap.add_argument("--questions", nargs="*", default=None)
    ap.add_argument("--hybrid", action="store_true", help="the server searches with vectors too (embeds the vault first)")
    ap.add_argument("--against", type=Path, default=None, help="another source tree, run interleaved on a vault copy")
    ap.add_argument("--thin-only", action="store_true", help="time the thin client only (not the full click CLI)")
    args = ap.parse_args(argv)
    res = run(args)
    report(res)
    path = write_result(NAME, res)
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
