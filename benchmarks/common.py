"""Shared benchmark plumbing: config and paths, timing statistics, result files, temp state, tables.

Every benchmark module exposes ``NAME``, ``run(cfg) -> dict``, ``report(result, console)`` and
``summary_rows(result) -> list[dict]``; ``benchmarks.run`` drives them and :func:`standalone_main`
lets each one run alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
BENCH_DATA_ENV = "HIVE_BRAIN_BENCH_DATA"
DEFAULT_BENCH_DATA = REPO_ROOT.parent / "shared" / "bench-data"


# --------------------------------------------------------------------------- config


@dataclass(frozen=True)
class BenchConfig:
    mode: str  # "quick" or "full"
    bench_data: Path
    results_dir: Path = RESULTS_DIR

    @property
    def quick(self) -> bool:
        return self.mode == "quick"


def bench_data_path(arg: str | os.PathLike[str] | None = None) -> Path:
    """The bench-data folder: the argument, else $HIVE_BRAIN_BENCH_DATA, else ../shared/bench-data."""
    if arg:
        return Path(arg).expanduser().resolve()
    env = os.environ.get(BENCH_DATA_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return DEFAULT_BENCH_DATA.resolve()


def add_common_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="mode", action="store_const", const="quick",
                   help="subsampled questions, under 10 minutes on 2 cores (default)")
    g.add_argument("--full", dest="mode", action="store_const", const="full", help="every question")
    ap.set_defaults(mode="quick")
    ap.add_argument("--bench-data", default=None,
                    help=f"bench-data folder (default: ${BENCH_DATA_ENV} or {DEFAULT_BENCH_DATA})")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(mode=args.mode, bench_data=bench_data_path(args.bench_data))


class MissingData(RuntimeError):
    """A benchmark's input data is not where it should be."""


def require_file(path: Path) -> Path:
    if not path.is_file():
        raise MissingData(f"missing benchmark data: {path} (pass --bench-data or set ${BENCH_DATA_ENV})")
    return path


# --------------------------------------------------------------------------- timing


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method); q in [0, 1]."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def p95(values: Sequence[float]) -> float:
    return quantile(values, 0.95)


def latency_summary(seconds: Sequence[float]) -> dict[str, float | int]:
    """Median/p95/mean/min/max in milliseconds of a list of durations in seconds."""
    ms = [s * 1000.0 for s in seconds]
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "median_ms": round(median(ms), 3),
        "p95_ms": round(p95(ms), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "min_ms": round(min(ms), 3),
        "max_ms": round(max(ms), 3),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run fn once; return (its result, wall seconds)."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# --------------------------------------------------------------------------- environment


def host_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


@contextmanager
def temp_state_dir(prefix: str = "hive-brain-bench-") -> Iterator[Path]:
    """A throwaway $HIVE_BRAIN_STATE_DIR (and no $HIVE_BRAIN_VAULT) for the duration; restored after."""
    saved = {k: os.environ.get(k) for k in ("HIVE_BRAIN_STATE_DIR", "HIVE_BRAIN_VAULT")}
    d = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["HIVE_BRAIN_STATE_DIR"] = str(d)
    os.environ.pop("HIVE_BRAIN_VAULT", None)
    try:
        yield d
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(d, ignore_errors=True)


@contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


_T0 = time.perf_counter()


def log(msg: str) -> None:
    """A progress line on stderr (tables and JSON stay clean)."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def short_error(e: BaseException, limit: int = 300) -> str:
    msg = f"{type(e).__name__}: {e}".strip()
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


# --------------------------------------------------------------------------- results


def write_result(name: str, payload: dict[str, Any], results_dir: Path = RESULTS_DIR) -> Path:
    """Write ``results_dir/<name>.json`` with a ``meta`` block (time, host, commit) added."""
    results_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": name,
        "meta": {
            "written": datetime.now(UTC).isoformat(timespec="seconds"),
            "git_commit": git_commit(),
            "host": host_info(),
        },
        **payload,
    }
    path = results_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def summary_row(benchmark: str, system: str, metric: str, value: Any, *, target: str | None = None,
                vs_baseline: str | None = None, status: str = "ok",
                note: str | None = None) -> dict[str, Any]:
    """One row of the combined summary table (also the shape stored in summary.json)."""
    return {"benchmark": benchmark, "system": system, "metric": metric, "value": value, "target": target,
            "vs_baseline": vs_baseline, "status": status, "note": note}


def check_target(value: float | None, threshold: float, *, higher_is_better: bool = True) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    ok = value >= threshold if higher_is_better else value < threshold
    return "pass" if ok else "FAIL"


# --------------------------------------------------------------------------- tables


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:.{digits}f}"
    return str(v)


def make_console() -> Any:
    from rich.console import Console

    # Wide enough for the metric tables when piped to a file; $COLUMNS still wins.
    width = int(os.environ.get("COLUMNS", "0") or 0) or (None if sys.stdout.isatty() else 180)
    return Console(width=width)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], console: Any = None,
                *, digits: int = 3, caption: str | None = None) -> None:
    """Print a rich table; numbers right-aligned, None shown as '-'."""
    from rich.table import Table

    console = console or make_console()
    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows) if rows else False
               for i in range(len(columns))]
    for i, (col, num) in enumerate(zip(columns, numeric, strict=True)):
        table.add_column(col, justify="right" if num else "left", overflow="fold", no_wrap=i == 0)
    for r in rows:
        table.add_row(*(fmt(v, digits) for v in r))
    console.print(table)


# --------------------------------------------------------------------------- standalone entry


def run_module(mod: ModuleType, cfg: BenchConfig, console: Any = None, **kwargs: Any) -> dict[str, Any]:
    """Run one benchmark module, write its JSON, print its report; returns the result dict."""
    console = console or make_console()
    t0 = time.perf_counter()
    result = mod.run(cfg, **kwargs)
    result["duration_s"] = round(time.perf_counter() - t0, 2)
    result["mode"] = cfg.mode
    result["result_file"] = str(write_result(mod.NAME, result, cfg.results_dir))
    mod.report(result, console)
    console.print(f"[dim]{mod.NAME}: {result['duration_s']:.1f} s, wrote {result['result_file']}[/dim]")
    return result


def standalone_main(mod: ModuleType, argv: Sequence[str] | None = None,
                    extra_args: Callable[[argparse.ArgumentParser], None] | None = None,
                    kwargs_from_args: Callable[[argparse.Namespace], dict[str, Any]] | None = None) -> int:
    """``python -m benchmarks.<name> [--quick|--full] [--bench-data PATH]`` for one benchmark module."""
    ap = argparse.ArgumentParser(prog=f"python -m benchmarks.{mod.NAME}", description=mod.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap)
    if extra_args:
        extra_args(ap)
    args = ap.parse_args(argv)
    kwargs = kwargs_from_args(args) if kwargs_from_args else {}
    run_module(mod, config_from_args(args), **kwargs)
    return 0
