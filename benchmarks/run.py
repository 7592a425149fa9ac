"""Run the hive-brain benchmarks and write a combined summary.

    python -m benchmarks.run [--quick|--full] [--only startup,locomo,...] [--bench-data PATH] [--plots DIR]

--quick (default) subsamples questions and vault sizes and finishes in under 10 minutes on 2 cores;
--full asks every question and adds the 100k-note vault. Each benchmark writes
benchmarks/results/<name>.json; this writes results/summary.json (with the machine, the commit and
the load average at start and end) and prints one combined table. A benchmark that fails is
reported as failed; the others still run. --plots DIR writes PNG plots (matplotlib) there.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from . import (
    capsule,
    cmrc,
    freshness,
    locomo,
    operations,
    prompt_hook,
    resources,
    scale,
    smallvault,
    startup,
    writes,
)
from .common import (
    add_common_args,
    config_from_args,
    embedding_pack,
    enable_bytecode_cache,
    git_commit,
    git_dirty,
    host_info,
    load_average,
    make_console,
    print_table,
    run_module,
    short_error,
    summary_row,
    write_result,
)

# prompt_hook runs here as a smoke only (the memories alone, every other tune prompt); its three vault
# sizes run alone: python -m benchmarks.prompt_hook --full --work DIR.
BENCHMARKS: dict[str, ModuleType] = {m.NAME: m for m in (startup, locomo, cmrc, smallvault, scale, freshness, resources,
                                                          writes, operations, capsule, prompt_hook)}


def parse_only(value: str | None) -> list[str]:
    if not value:
        return list(BENCHMARKS)
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown benchmark(s): {', '.join(unknown)}; "
                                         f"choose from {', '.join(BENCHMARKS)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap)
    ap.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    ap.add_argument("--plots", default=None, metavar="DIR", help="write PNG plots there (needs matplotlib)")
    args = ap.parse_args(argv)
    try:
        names = parse_only(args.only)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    cfg = config_from_args(args)
    console = make_console()
    console.print(f"[bold]hive-brain benchmarks[/bold] ({cfg.mode}); bench data: {cfg.bench_data}")
    bytecode = enable_bytecode_cache()
    pack, why = embedding_pack()
    machine = host_info()
    load_start = load_average()
    console.print(f"[dim]commit {git_commit()}; {machine['cpu_count']} cores ({machine['cpu_model']}), "
                  f"{machine['mem_total_mb']} MB; load average {load_start}; embedding pack: {pack or why}[/dim]")

    t_start = time.perf_counter()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    plots: list[str] = []
    entries: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for name in names:
        mod = BENCHMARKS[name]
        console.rule(name)
        t0 = time.perf_counter()
        try:
            result = run_module(mod, cfg, console)
            bench_rows = mod.summary_rows(result)
            entries[name] = {"status": "ok", "duration_s": result["duration_s"],
                             "result_file": result["result_file"], "rows": bench_rows}
            rows.extend(bench_rows)
            if args.plots and hasattr(mod, "plot"):
                plots += [str(p) for p in mod.plot(result, Path(args.plots))]
        except Exception as e:  # one broken benchmark must not hide the others
            console.print(f"[red]{name} failed:[/red] {short_error(e)}")
            entries[name] = {"status": "failed", "duration_s": round(time.perf_counter() - t0, 2),
                             "reason": short_error(e), "traceback": traceback.format_exc()}
            rows.append(summary_row(name, "-", "-", None, status="failed", note=short_error(e)))
    total = round(time.perf_counter() - t_start, 2)

    path = write_result("summary", {
        "mode": cfg.mode,
        "command": "python -m benchmarks.run " + " ".join(argv if argv is not None else sys.argv[1:]),
        "bench_data": str(cfg.bench_data),
        "embedding_pack": str(pack) if pack else None,
        "embedding_pack_unavailable": why,
        "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": total,
        "git_dirty": git_dirty(),
        "bytecode": bytecode,
        "machine": machine,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "plots": plots,
        "benchmarks": entries,
    }, cfg.results_dir)
    console.rule("summary")
    print_table(f"hive-brain benchmarks: summary ({cfg.mode}, {total:.1f} s)",
                ["benchmark", "system", "metric", "value", "target", "vs baseline", "status", "note"],
                [[r["benchmark"], r["system"], r["metric"], r["value"], r["target"], r["vs_baseline"],
                  r["status"], r["note"]] for r in rows], console)
    for name, entry in entries.items():
        console.print(f"[dim]{name}: {entry['status']}, {entry['duration_s']:.1f} s[/dim]")
    console.print(f"[dim]wrote {path}[/dim]")
    return 1 if any(entry["status"] == "failed" for entry in entries.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
