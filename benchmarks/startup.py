"""Startup: wall time of `hive-brain --help` as a whole process, against a bare `python -c pass`.

Commands run round-robin (so drift hits all of them alike), N times each after one untimed warm-up
that also checks they work. Also times `python -c "import hive_brain.cli.app"` and lists the heavy
modules (tantivy, lancedb, onnxruntime, numpy, pyarrow, ...) that import pulls in.
Target: `hive-brain --help` median under 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import (
    BenchConfig,
    check_target,
    latency_summary,
    log,
    print_table,
    standalone_main,
    summary_row,
    temp_state_dir,
)

NAME = "startup"
TARGET_MS = 150.0
DEFAULT_RUNS = 20
HEAVY_MODULES = ("tantivy", "lancedb", "onnxruntime", "numpy", "pyarrow", "tokenizers", "pandas", "torch",
                 "click", "rich", "yaml", "watchdog", "mcp")
# The design forbids these at CLI import; click/rich/yaml are listed for information only.
FORBIDDEN_AT_CLI_IMPORT = ("tantivy", "lancedb", "onnxruntime", "numpy", "pyarrow")
BASELINE = "python -c pass"

_PROBE = ("import json, sys\nimport hive_brain.cli.app\n"
          "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n")


def console_script() -> str | None:
    """The installed `hive-brain` console script: on PATH, else next to this interpreter."""
    found = shutil.which("hive-brain")
    if found:
        return found
    sibling = Path(sys.executable).parent / "hive-brain"
    return str(sibling) if sibling.is_file() and os.access(sibling, os.X_OK) else None


def commands() -> dict[str, list[str]]:
    py = sys.executable
    cmds = {
        BASELINE: [py, "-c", "pass"],
        "python -m hive_brain --help": [py, "-m", "hive_brain", "--help"],
    }
    script = console_script()
    if script:
        cmds["hive-brain --help"] = [script, "--help"]
    cmds["python -c 'import hive_brain.cli.app'"] = [py, "-c", "import hive_brain.cli.app"]
    return cmds


def _run_once(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return time.perf_counter() - t0, proc


def _tail(b: bytes, n: int = 300) -> str:
    s = b.decode("utf-8", "replace").strip().splitlines()
    return (s[-1] if s else "")[-n:]


def heavy_modules_after_cli_import() -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, timeout=60)
    if proc.returncode != 0:
        return {"status": "unavailable", "reason": _tail(proc.stderr)}
    loaded = set(json.loads(proc.stdout.decode().strip().splitlines()[-1]))
    heavy = [m for m in HEAVY_MODULES if m in loaded]
    forbidden = [m for m in FORBIDDEN_AT_CLI_IMPORT if m in loaded]
    return {"status": "ok", "heavy_loaded": heavy, "forbidden_loaded": forbidden, "module_count": len(loaded)}


def import_time_top(n: int = 12, max_depth: int = 2) -> dict[str, Any]:
    """`python -X importtime -c 'import hive_brain.cli.app'`: costliest imports (cumulative) to max_depth."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import hive_brain.cli.app"],
                          capture_output=True, timeout=60)
    if proc.returncode != 0:
        return {"status": "unavailable", "reason": _tail(proc.stderr)}
    rows: list[dict[str, Any]] = []
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        # "import time:  self_us | cumulative_us | <2 spaces per nesting level>name"
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or "cumulative" in line:
            continue
        name = parts[2][1:] if parts[2].startswith(" ") else parts[2]
        depth = (len(name) - len(name.lstrip(" "))) // 2
        if depth > max_depth:
            continue
        rows.append({"module": name.strip(), "depth": depth, "self_ms": int(parts[0].split(":")[1]) / 1000,
                     "cumulative_ms": int(parts[1]) / 1000})
    rows.sort(key=lambda r: -r["cumulative_ms"])
    return {"status": "ok", "top": rows[:n]}


def run(cfg: BenchConfig, runs: int | None = None) -> dict[str, Any]:
    n = runs or DEFAULT_RUNS
    cmds = commands()
    results: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = {}
    with temp_state_dir():
        for label, argv in cmds.items():
            _, proc = _run_once(argv)  # warm-up: page cache, .pyc files; also checks the command works
            if proc.returncode != 0:
                results[label] = {"argv": argv, "status": "unavailable",
                                  "reason": f"exit {proc.returncode}: {_tail(proc.stderr)}"}
            else:
                results[label] = {"argv": argv, "status": "ok"}
                times[label] = []
        log(f"startup: {n} rounds of {len(times)} commands")
        for _ in range(n):
            for label in times:
                dt, _proc = _run_once(cmds[label])
                times[label].append(dt)
        heavy = heavy_modules_after_cli_import()
        imports = import_time_top()
    base = latency_summary(times.get(BASELINE, []))
    for label, ts in times.items():
        s = latency_summary(ts)
        res = results[label]
        res.update(s)
        if label != BASELINE and base.get("median_ms"):
            res["ratio_to_baseline"] = round(s["median_ms"] / base["median_ms"], 2)
            res["overhead_ms"] = round(s["median_ms"] - base["median_ms"], 2)
        if "--help" in label:
            res["target"] = f"median < {TARGET_MS:.0f} ms"
            res["target_status"] = check_target(s["median_ms"], TARGET_MS, higher_is_better=False)
    return {"runs": n, "target_ms": TARGET_MS, "commands": results, "cli_import_modules": heavy,
            "cli_import_time": imports}


def report(result: dict[str, Any], console: Any) -> None:
    rows = []
    for label, r in result["commands"].items():
        rows.append([label, r.get("n"), r.get("median_ms"), r.get("p95_ms"), r.get("min_ms"),
                     r.get("ratio_to_baseline"), r.get("overhead_ms"), r.get("target_status"),
                     r["status"] + (f": {r['reason']}" if r.get("reason") else "")])
    print_table(f"Startup: whole-process wall time, N={result['runs']} each (target: --help median < "
                f"{result['target_ms']:.0f} ms)",
                ["command", "n", "median ms", "p95 ms", "min ms", "x baseline", "+ms vs baseline", "target",
                 "status"], rows, console, digits=1)
    heavy = result["cli_import_modules"]
    if heavy["status"] == "ok":
        console.print(f"modules loaded by `import hive_brain.cli.app`: {heavy['module_count']}; "
                      f"heavy/third-party: {', '.join(heavy['heavy_loaded']) or 'none'}; "
                      f"forbidden by the design: {', '.join(heavy['forbidden_loaded']) or 'none'}")
    else:
        console.print(f"`import hive_brain.cli.app`: unavailable ({heavy['reason']})")
    imp = result["cli_import_time"]
    if imp["status"] == "ok" and imp["top"]:
        print_table("`python -X importtime -c 'import hive_brain.cli.app'`: costliest imports (depth <= 2)",
                    ["module", "depth", "cumulative ms", "self ms"],
                    [[r["module"], r["depth"], r["cumulative_ms"], r["self_ms"]] for r in imp["top"]],
                    console, digits=1)


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for label, r in result["commands"].items():
        if r["status"] != "ok":
            rows.append(summary_row(NAME, label, "median ms", None, status="unavailable",
                                    note=r.get("reason")))
            continue
        vs = None if label == BASELINE else f"x{r.get('ratio_to_baseline')} (+{r.get('overhead_ms')} ms)"
        rows.append(summary_row(NAME, label, "median ms", r["median_ms"], target=r.get("target"),
                                vs_baseline=vs, status=r.get("target_status", "ok")))
    heavy = result["cli_import_modules"]
    if heavy["status"] == "ok":
        rows.append(summary_row(NAME, "import hive_brain.cli.app", "forbidden heavy modules",
                                ", ".join(heavy["forbidden_loaded"]) or "none", target="none",
                                status="pass" if not heavy["forbidden_loaded"] else "FAIL"))
    return rows


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--runs", type=int, default=None, help=f"runs per command (default {DEFAULT_RUNS})")


if __name__ == "__main__":
    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"runs": a.runs}))
