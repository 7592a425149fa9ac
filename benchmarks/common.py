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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
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

# A benchmark starts the servers it measures; a cold `recall` (or a session-start hook) must not start
# one behind its back and turn the next measurement warm. Inherited by every subprocess it runs.
os.environ.setdefault("HIVE_BRAIN_AUTOSTART", "0")


def host_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "mem_total_mb": mem_total_mb(),
    }


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def mem_total_mb() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def load_average() -> list[float] | None:
    """1/5/15-minute load averages (the machine may be shared: record them with the numbers)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def git_dirty() -> list[str] | None:
    """Files changed against HEAD (``git status --porcelain``): numbers may reflect uncommitted work."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return [line[3:] for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else None


@contextmanager
def state_dir_at(d: Path) -> Iterator[Path]:
    """$HIVE_BRAIN_STATE_DIR set to ``d`` (and no $HIVE_BRAIN_VAULT) for the duration; restored after."""
    saved = {k: os.environ.get(k) for k in ("HIVE_BRAIN_STATE_DIR", "HIVE_BRAIN_VAULT")}
    os.environ["HIVE_BRAIN_STATE_DIR"] = str(d)
    os.environ.pop("HIVE_BRAIN_VAULT", None)
    try:
        yield d
    finally:
        restore_env(saved)


def restore_env(saved: Mapping[str, str | None]) -> None:
    """Put back the environment variables ``saved`` holds (None: the variable was not set)."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextmanager
def temp_state_dir(prefix: str = "hive-brain-bench-") -> Iterator[Path]:
    """A throwaway $HIVE_BRAIN_STATE_DIR (see ``state_dir_at``), removed after."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with state_dir_at(d):
            yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextmanager
def vault_dir(keep: Path | None, size: int, prefix: str) -> Iterator[Path]:
    """``keep/<size>``, kept between runs, or a throwaway folder; its state dir is ``<it>/state`` either way
    (a benchmark whose large vault takes minutes to embed builds it once and asks it again)."""
    with nullcontext(keep) if keep is not None else temp_dir(prefix) as base:
        d = base / str(size)
        d.mkdir(parents=True, exist_ok=True)
        with state_dir_at(d / "state"):
            yield d


def built_once(work: Path, build: Callable[[Path], tuple[Any, dict[str, Any]]]) -> tuple[Any, dict[str, Any]]:
    """An engine on ``work/vault`` and what its build said (``build(root)`` -> engine, JSON maps with an
    ``info``), built once: the maps are written to ``work/maps.json`` last, and a folder that has them
    (a kept :func:`vault_dir`) is opened again as it is, ``info["reused"]`` set."""
    maps_file = work / "maps.json"
    if maps_file.exists():
        from hive_brain.engine import Engine

        maps = json.loads(maps_file.read_text(encoding="utf-8"))
        maps["info"] = {**maps["info"], "reused": True}
        return Engine.open(work / "vault"), maps
    eng, maps = build(work / "vault")
    maps_file.write_text(json.dumps(maps), encoding="utf-8")
    return eng, maps


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


def pycache_prefix() -> Path:
    """Where the processes benchmarks (and the harnesses tests share with them) spawn keep their .pyc."""
    prefix = Path(tempfile.gettempdir()) / f"hive-brain-bench-pycache-{os.getuid()}"
    prefix.mkdir(parents=True, exist_ok=True)
    return prefix


def enable_bytecode_cache() -> dict[str, Any]:
    """Let the processes a benchmark spawns read and write .pyc files, as an installed package has.

    An environment with ``PYTHONDONTWRITEBYTECODE=1`` (set here for development) would otherwise
    make every hook or CLI process compile each hive_brain module from source (~25 ms per hook).
    The cache goes to a folder under the temp dir (``PYTHONPYCACHEPREFIX``), never into the
    repository. Returns what was set, for the result files.
    """
    prefix = pycache_prefix()
    was = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    return {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE_was": was}


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
    enable_bytecode_cache()
    kwargs = kwargs_from_args(args) if kwargs_from_args else {}
    run_module(mod, config_from_args(args), **kwargs)
    return 0


# --------------------------------------------------------------------------- processes and memory


@dataclass
class ProcResult:
    seconds: float  # wall time from spawn to exit (stdin written, stdout read)
    returncode: int
    stdout: str
    stderr: str
    # wait4's ru_maxrss (KiB). Linux folds the *spawning* process's peak into it when the child was
    # started with vfork (as subprocess does), so it is only the child's own peak when the spawner is
    # small: use peak_rss() for memory numbers.
    max_rss_kb: int | None
    cpu_s: float | None = None  # the child's own user + system CPU time (wait4): steadier than wall on a busy machine


def run_process(argv: Sequence[str], *, input_text: str = "", env: dict[str, str] | None = None,
                timeout: float = 60.0, cwd: str | os.PathLike[str] | None = None) -> ProcResult:
    """Run one process to completion: wall time, output and its own peak RSS (``os.wait4``)."""
    import threading

    t0 = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=cwd)
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        out, err = b"", b""
        try:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            # Small payloads: write all, then read both pipes (stderr through a thread: no deadlock).
            box: dict[str, bytes] = {}
            t = threading.Thread(target=lambda: box.__setitem__("err", proc.stderr.read()))  # type: ignore[union-attr]
            t.start()
            try:
                proc.stdin.write(input_text.encode("utf-8"))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            out = proc.stdout.read()
            t.join()
            err = box.get("err", b"")
        finally:
            _pid, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - t0
    finally:
        killer.cancel()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None and not f.closed:
                f.close()
    return ProcResult(seconds=seconds, returncode=proc.returncode, stdout=out.decode("utf-8", "replace"),
                      stderr=err.decode("utf-8", "replace"), max_rss_kb=int(usage.ru_maxrss) or None,
                      cpu_s=usage.ru_utime + usage.ru_stime)


_RSS_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("@@maxrss=%d@@\\n" % usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def peak_rss(argv: Sequence[str], *, input_text: str = "", env: dict[str, str] | None = None,
             timeout: float = 60.0) -> tuple[int | None, ProcResult]:
    """(peak RSS in KiB, the run) of a process started by a small launcher (a bare Python that forks).

    The launcher keeps this (possibly large) process out of the child's ru_maxrss; what remains is
    the launcher's own ~10 MB, below any hive-brain process. Not for timing (the launcher adds a
    Python start).
    """
    r = run_process([sys.executable, "-c", _RSS_LAUNCHER, *argv], input_text=input_text, env=env, timeout=timeout)
    import re

    m = re.search(r"@@maxrss=(\d+)@@", r.stderr)
    return (int(m.group(1)) if m else None), r


def proc_memory_kb(pid: int) -> dict[str, int]:
    """VmRSS (now), VmHWM (peak), RssAnon and RssFile (mapped files: libraries, the model) of a live
    process, in KiB, from /proc (no psutil needed)."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return out


def dir_bytes(path: Path, *, apparent: bool = False) -> int:
    """Bytes allocated on disk under path (st_blocks; ``apparent``: the files' sizes instead)."""

    def size(st: os.stat_result) -> int:
        return st.st_size if apparent else st.st_blocks * 512

    if path.is_file():
        return size(path.stat())
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += size(os.lstat(os.path.join(dirpath, f)))
            except OSError:
                pass
    return total


STATE_PARTS = {  # label -> paths inside <state>/<vault-id>/ (see docs/architecture.md, "State on disk")
    "lexical": ("index/lexical",),
    "vectors": ("index/vectors",),
    "vector queue": ("index/pending.sqlite", "index/pending.sqlite-wal", "index/pending.sqlite-shm"),
    "generations": ("generations",),
    "catalog": ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"),
    "embedding cache": ("embcache.sqlite", "embcache.sqlite-wal", "embcache.sqlite-shm"),
    "replay": ("replay",),
}


def state_sizes(state: Path) -> dict[str, int]:
    """On-disk bytes of a vault's state dir by part (lexical, vectors, generations, caches, other, total)."""
    out: dict[str, int] = {}
    counted = 0
    for label, rels in STATE_PARTS.items():
        n = sum(dir_bytes(state / r) for r in rels if (state / r).exists())
        out[label] = n
        counted += n
    total = dir_bytes(state)
    out["other"] = max(0, total - counted)
    out["total"] = total
    return out


# --------------------------------------------------------------------------- hive-brain under test

MODEL_DIR_ENV = "HIVE_BRAIN_MODEL_DIR"


def embedding_pack() -> tuple[Path | None, str | None]:
    """(the embedding pack this run may use, or None and why): from $HIVE_BRAIN_MODEL_DIR or the default."""
    try:
        from hive_brain.config import resolve
        from hive_brain.embedding.pack import find_pack

        s = resolve()
        pack = find_pack(Path(s.model_dir))
    except Exception as e:  # noqa: BLE001 - reported as the reason semantic rows are unavailable
        return None, short_error(e)
    if pack is None:
        return None, f"no embedding pack in {s.model_dir} (set ${MODEL_DIR_ENV} to a pack)"
    return pack, None


@contextmanager
def model_dir(pack: Path | None) -> Iterator[None]:
    """$HIVE_BRAIN_MODEL_DIR = pack for the duration; None = an empty dir (lexical only). Restored after."""
    saved = os.environ.get(MODEL_DIR_ENV)
    empty = None
    if pack is None:
        empty = Path(tempfile.mkdtemp(prefix="hive-brain-bench-nomodel-"))
    os.environ[MODEL_DIR_ENV] = str(pack if pack is not None else empty)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(MODEL_DIR_ENV, None)
        else:
            os.environ[MODEL_DIR_ENV] = saved
        if empty is not None:
            shutil.rmtree(empty, ignore_errors=True)


def hook_env(vault: Path, agent: str) -> dict[str, str]:
    """The environment the installed prompt hook runs with (`hooks install` pins agent and vault)."""
    env = dict(os.environ)
    env["HIVE_AGENT_ID"] = agent
    env["HIVE_BRAIN_VAULT"] = str(vault)
    return env


def hook_argv() -> list[str]:
    """The prompt hook's command as `hooks install` writes it (``python -S .../hookentry.py hook prompt``)."""
    from hive_brain.agents.settingsfile import hook_executable

    return [*hook_executable(), "hook", "prompt"]


@contextmanager
def running_server(vault: Path, state: Path, *, timeout: float = 120.0) -> Iterator[dict[str, Any]]:
    """`hive-brain serve` for the vault as a detached process (``client.ensure_server``), stopped after.

    Yields ``{"pid", "start_s", "ping"}``. Raises whatever ``ensure_server`` raises when it cannot
    start (callers report the rows as unavailable).
    """
    from hive_brain.rpc import client

    t0 = time.perf_counter()
    try:
        pong = client.ensure_server(state, vault, timeout=timeout)
    except BaseException:
        stop_server(state)  # a server that started but never became ready must not outlive the run
        raise
    info = {"pid": pong.get("pid") or (client.read_info(state) or {}).get("pid"),
            "start_s": round(time.perf_counter() - t0, 3), "ping": pong}
    try:
        yield info
    finally:
        stop_server(state)


def stop_server(state: Path) -> None:
    try:
        from hive_brain.daemon.server import stop_server as _stop

        _stop(state, timeout=30.0)
    except Exception as e:  # noqa: BLE001 - never leave the benchmark hanging on a stop
        log(f"could not stop the server of {state}: {short_error(e)}")


def wait_server_idle(state: Path, *, timeout: float = 3600.0, poll: float = 0.5) -> dict[str, Any]:
    """Wait until the server has no passages left to embed (nor to read ahead for the reranker) and no
    catch-up pending; its last status."""
    from hive_brain.rpc import client

    deadline = time.monotonic() + timeout
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = client.call(state, "status", timeout=10.0)
        sem = st.get("semantic") or {}
        if st.get("ready") and not sem.get("pendingPassages") and not sem.get("rerankAhead"):
            return st
        time.sleep(poll)
    raise TimeoutError(f"the server still had work after {timeout:.0f}s: {st.get('semantic')}")


def profile_top(fn: Callable[[], Any], n: int = 20, sort: str = "cumulative") -> list[str]:
    """cProfile one call of fn; the top n lines of the pstats listing (for "why was this slow")."""
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    return pstats_lines(prof, n, sort)


def pstats_lines(prof: Any, n: int = 20, sort: str = "cumulative") -> list[str]:
    import io
    import pstats

    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.strip_dirs().sort_stats(sort).print_stats(n)
    lines = buf.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    head = [line.strip() for line in lines[:start] if "function calls" in line]
    return head + [line.rstrip() for line in lines[start:] if line.strip()]


def save_plot(fig: Any, out_dir: Path, name: str) -> list[Path]:
    """Write a matplotlib figure as PNG into `out_dir` and close it; returns [path]."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
