"""Two devices, real sync engines (issue 31): one vault shared through git and through Syncthing.

Each device is a vault folder with its own ``HIVE_BRAIN_STATE_DIR``, its own running server
(``serve --detach``) and its own agent: the laptop's writes through the CLI, the desktop's through an
MCP session (``hive-brain mcp``, the SDK's stdio client). Between them runs a real engine:

- **git**: a bare repository on disk; each device commits everything and pulls with a merge, as the
  obsidian-git plugin's auto-backup does, and a merge that stopped on a conflict is committed as it
  stands (markers and all: that plugin's next backup does the same);
- **Syncthing** (Debian's ``syncthing``): two instances on 127.0.0.1, each with its own home dir, GUI/API
  and sync ports on loopback, discovery, relays, NAT and usage reports off, the vault folder shared by
  device id in ``config.xml``; "offline" is a paused device (REST ``/rest/system/pause``). Only the
  laptop dials (two instances dialling each other at once wait out a 20 s hello timeout).

Scenarios (each on a fresh pair): both remember different memories at once; both evolve the same
memory; one deletes while the other updates; a hand edit in an editor on one while the other's agent
updates the note; an undo bringing back an old version; a half-written file delivered; one device
offline for a while, then back. After the engine settles, the checks:

- the two vaults hold the same notes; every acknowledged write is there exactly once (by id, or in a
  conflict doctor names); one active version per key, or the conflict is listed by ``doctor`` on both
  (the same list), ``repair-conflicts`` plans the same repair on both, and ``--confirm`` on both before
  either syncs writes the same notes and leaves none on either; git markers are named by ``doctor`` and never indexed; a person
  resolving them (keeping both sides) and a repair leave none;
- each device's index equals its notes (``benchmarks.chaos.index_problems``), with no temp file
  (``.syncthing.*.tmp``) or staged file in it; recall on both gives the same top results;
- both servers are still the ones started at the beginning.

    python -m benchmarks.sync [--engines git,syncthing] [--rounds 3]

``--rounds`` repeats the writing phase of each scenario (the short form, ``tests/test_sync_engines.py``,
runs one, all of an engine's scenarios on one pair: :meth:`Run.scenario`). Counts per scenario and engine are in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .common import pycache_prefix

NAME = "sync"
REPO = Path(__file__).resolve().parents[1]
SETTLE_S = 60.0  # the longest an engine may take to carry one round of changes
# What a sync carries: everything in the vault except the engines' own folders and our staging.
LOCAL = (".git/", ".stfolder", ".stversions/", ".stignore", ".hive-brain/staging/")
QUESTIONS = ("which region do production deploys go to", "how do we restart the api",
             "what does the team use for continuous integration", "where is the package mirror")

# Run in each device's environment: the index checked against the notes once the server caught up.
_PROBE = r"""
import json, sys, time
from hive_brain.engine import Engine
from benchmarks.chaos import index_problems
eng = Engine.open()
deadline = time.monotonic() + float(sys.argv[1])
while True:
    eng.catalog.refresh()
    problems = index_problems(eng, eng.vault.root)
    if not problems or time.monotonic() > deadline:
        break
    time.sleep(0.3)
_gid, man = eng.indexer.current_manifest()
mems = [{"id": e.id, "path": e.path, "key": e.memory_key, "status": e.status}
        for e in eng.catalog.select("kind = ?", ("memory",))]
print(json.dumps({"problems": problems, "indexed": sorted(man), "memories": mems}))
"""


def both(devices: tuple[Device, Device], fn: Callable[[Device], Any]) -> dict[str, Any]:
    """``fn`` on the two devices at once (each a CLI process of its own): a check reads both devices'
    answers, and under load two processes get twice the share of the CPU one does."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {d.name: pool.submit(fn, d) for d in devices}
        return {name: f.result() for name, f in futures.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class McpAgent:
    """An agent writing through MCP: one ``hive-brain mcp`` session (the SDK's stdio client, as the agents
    and ``tests/test_mcp.py`` talk to it), held open from the device's start to its stop the way an
    agent's MCP server stays up while the engine changes the vault beneath it. The session lives on an
    event loop of its own thread; a call waits for its answer."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sync-mcp", daemon=True)
        self.ready: Future[Any] = Future()
        self.session: Any = None
        self.closing: asyncio.Event | None = None
        self.task: Future[None] | None = None

    async def _serve(self) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        self.closing = asyncio.Event()
        params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"], env=self.env,
                                       cwd=str(REPO))
        try:
            async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                self.session = s
                self.ready.set_result(True)
                await self.closing.wait()
        except BaseException as e:
            if not self.ready.done():
                self.ready.set_exception(e)
            raise

    def start(self) -> None:
        self.thread.start()
        self.task = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        self.ready.result(timeout=120)

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        res = asyncio.run_coroutine_threadsafe(self.session.call_tool(tool, args), self.loop).result(timeout=120)
        text = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
        if res.is_error:
            raise AssertionError(f"MCP {tool} {args}: {text}")
        return dict(json.loads(text))

    def close(self) -> None:
        try:
            if self.task is not None and self.closing is not None:
                self.loop.call_soon_threadsafe(self.closing.set)
                self.task.result(timeout=30)  # the session's exit ends the `hive-brain mcp` process
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)
            self.loop.close()


def mcp_call(args: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """A CLI write (``update --memory-id X --content C``) as the MCP tool call an agent makes instead."""
    out: dict[str, Any] = {}
    rest = list(args[1:])
    while rest:
        key = rest.pop(0).removeprefix("--").replace("-", "_")
        out[key] = rest.pop(0) if rest and not rest[0].startswith("--") else True
    return args[0], out


class Device:
    """One device: a vault folder, a state dir, a server, and an agent writing through the CLI or MCP."""

    def __init__(self, root: Path, name: str, via: str = "cli") -> None:
        self.name = name
        self.via = via
        self.vault = root / name / "vault"
        self.state = root / name / "state"
        # Each CLI call is a process of its own: with PYTHONDONTWRITEBYTECODE (set for development) every
        # one compiled hive_brain from source, a third of a `doctor` call (benchmarks.common).
        self.env = {**os.environ, "HIVE_BRAIN_VAULT": str(self.vault), "HIVE_BRAIN_STATE_DIR": str(self.state),
                    "HIVE_BRAIN_AUTOSTART": "0", "HIVE_AGENT_ID": "", "PYTHONPATH": str(REPO),
                    "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(pycache_prefix())}
        for var in ("HIVE_AGENT_ID", "PYTHONDONTWRITEBYTECODE"):
            self.env.pop(var)
        self.server_pid: int | None = None
        self.mcp: McpAgent | None = None

    def write(self, *args: str) -> dict[str, Any]:
        """What the device's agent writes, the way it writes (``via``)."""
        if self.mcp is not None:
            return self.mcp.call(*mcp_call(args))
        return dict(self.cli(*args))

    def cli(self, *args: str, ok: bool = True) -> Any:
        # cwd: `-m` puts it first on sys.path, and a vault found from it would beat HIVE_BRAIN_VAULT.
        p = subprocess.run([sys.executable, "-m", "hive_brain", *args, "--json"], env=self.env, capture_output=True,
                           text=True, timeout=120, cwd=REPO)
        # `doctor` exits 1 when it found something to fix: that is its answer.
        if ok and not (p.returncode == 0 or (args[:1] == ("doctor",) and p.returncode == 1)):
            raise AssertionError(f"{self.name}: hive-brain {' '.join(args)} exited {p.returncode}: {p.stdout}{p.stderr}")
        try:
            out = json.loads(p.stdout)
        except ValueError:
            out = {"raw": p.stdout, "stderr": p.stderr}
        if isinstance(out, dict):
            out["_exit"] = p.returncode
        return out

    def start(self) -> None:
        self.cli("serve", "--detach")
        self.server_pid = int(self.cli("serve", "--status")["pid"])
        if self.via == "mcp":
            self.mcp = McpAgent(self.env)
            self.mcp.start()

    def stop(self) -> None:
        try:
            if self.mcp is not None:
                self.mcp.close()
        finally:
            if self.server_pid is not None:
                self.cli("serve", "--stop", ok=False)

    def server_alive(self) -> bool:
        st = self.cli("serve", "--status", ok=False)
        return st.get("pid") == self.server_pid

    def files(self) -> dict[str, str]:
        """Every file a sync carries -> sha256. Syncthing's temp files (``.syncthing.<name>.tmp``) are not
        carried: one it pulled into and then dropped (the same bytes were already there) stays on that
        device until ``keepTemporariesH``; they must never be indexed (``check_devices``)."""
        out = {}
        for f in sorted(self.vault.rglob("*")):
            rel = f.relative_to(self.vault).as_posix()
            if f.name.startswith(".syncthing.") and f.name.endswith(".tmp"):
                continue
            if f.is_file() and not any(rel.startswith(x) or f"/{x}" in f"/{rel}" for x in LOCAL):
                out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
        return out

    def probe(self, wait_s: float = 30.0) -> dict[str, Any]:
        p = subprocess.run([sys.executable, "-c", _PROBE, str(wait_s)], env=self.env, capture_output=True, text=True,
                           timeout=wait_s + 120, cwd=REPO)
        if p.returncode:
            raise AssertionError(f"{self.name}: probe failed: {p.stderr[-2000:]}")
        return dict(json.loads(p.stdout))

    def top(self, q: str) -> list[str]:
        return [h["id"] for h in self.cli("recall", q, "--scope", "full-vault", "--limit", "5")["hits"]]


# -- the engines ---------------------------------------------------------------------------------------

def _git(cwd: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "sync", "GIT_AUTHOR_EMAIL": "sync@localhost", "GIT_COMMITTER_NAME": "sync",
           "GIT_COMMITTER_EMAIL": "sync@localhost", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    p = subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "pull.rebase=false", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=60)
    if ok and p.returncode:
        raise AssertionError(f"git {' '.join(args)} in {cwd}: {p.stdout}{p.stderr}")
    return p


class GitEngine:
    """A bare repository both devices push to; a sync is obsidian-git's backup: commit all, pull, push."""

    name = "git"

    def __init__(self, root: Path, a: Device, b: Device) -> None:
        self.root, self.a, self.b = root, a, b
        self.bare = root / "remote.git"
        self.offline: set[str] = set()
        self.merge_conflicts = 0

    @staticmethod
    def available() -> str | None:
        return None if shutil.which("git") else "git is not installed"

    def setup(self) -> None:
        _git(self.root, "init", "--bare", "-q", str(self.bare))
        _git(self.a.vault, "init", "-q")
        self._backup(self.a)
        _git(self.a.vault, "remote", "add", "origin", str(self.bare))
        _git(self.a.vault, "push", "-q", "-u", "origin", "HEAD:main")
        self.b.vault.parent.mkdir(parents=True, exist_ok=True)
        _git(self.root, "clone", "-q", str(self.bare), str(self.b.vault))

    def _backup(self, dev: Device) -> None:
        _git(dev.vault, "add", "-A")
        # A merge that stopped is committed even when its result equals our side (a modify/delete kept ours).
        merging = (dev.vault / ".git" / "MERGE_HEAD").exists()
        if merging or _git(dev.vault, "diff", "--cached", "--quiet", ok=False).returncode:
            _git(dev.vault, "commit", "-q", "-m", f"vault backup: {dev.name}")

    def sync_one(self, dev: Device) -> None:
        if dev.name in self.offline:
            return
        self._backup(dev)
        pulled = _git(dev.vault, "pull", "-q", "--no-edit", "origin", "main", ok=False)
        if pulled.returncode:
            if "CONFLICT" not in pulled.stdout + pulled.stderr:
                raise AssertionError(f"git pull on {dev.name}: {pulled.stdout}{pulled.stderr}")
            self.merge_conflicts += 1
            self._backup(dev)  # the conflicted files as they stand, markers and all
        _git(dev.vault, "push", "-q", "origin", "HEAD:main")

    def settle(self) -> None:
        for dev in (self.a, self.b, self.a):
            self.sync_one(dev)

    def go_offline(self, dev: Device) -> None:
        self.offline.add(dev.name)

    def go_online(self, dev: Device) -> None:
        self.offline.discard(dev.name)

    def stop(self) -> None:
        pass


class SyncthingEngine:
    """Two Syncthing instances on loopback sharing the vault folder; bounded and stopped at the end."""

    name = "syncthing"
    FOLDER = "vault"

    def __init__(self, root: Path, a: Device, b: Device) -> None:
        self.root, self.a, self.b = root, a, b
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.gui: dict[str, int] = {}
        self.ids: dict[str, str] = {}
        self.key = "hive-brain-sync-" + os.urandom(8).hex()
        self.merge_conflicts = 0

    @staticmethod
    def available() -> str | None:
        if not shutil.which("syncthing"):
            return "syncthing is not installed (Debian: apt-get install syncthing)"
        return None

    def _home(self, dev: Device) -> Path:
        return self.root / f"st-{dev.name}"

    def setup(self) -> None:
        self.b.vault.mkdir(parents=True, exist_ok=True)
        ports = {d.name: (free_port(), free_port()) for d in (self.a, self.b)}
        for dev in (self.a, self.b):
            home = self._home(dev)
            subprocess.run(["syncthing", "generate", f"--home={home}", "--no-default-folder"], capture_output=True,
                           check=True, timeout=60)
            self.ids[dev.name] = subprocess.run(["syncthing", "serve", f"--home={home}", "--device-id"],
                                                capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        for dev in (self.a, self.b):
            other = self.b if dev is self.a else self.a
            gui, listen = ports[dev.name]
            self.gui[dev.name] = gui
            self._configure(dev, other, gui, listen, ports[other.name][1])
        for dev in (self.a, self.b):
            log = open(self.root / f"st-{dev.name}.log", "wb")  # noqa: SIM115 (closed with the process)
            self.procs[dev.name] = subprocess.Popen(
                ["syncthing", "serve", f"--home={self._home(dev)}", "--no-browser", "--no-restart", "--no-upgrade",
                 "--skip-port-probing"], stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "STNODEFAULTFOLDER": "1", "STNOUPGRADE": "1"})
        deadline = time.monotonic() + 60
        while True:
            try:
                if all(self._api(d, "/rest/system/connections")["connections"][self.ids[o.name]]["connected"]
                       for d, o in ((self.a, self.b), (self.b, self.a))):
                    break
            except (OSError, KeyError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError("the two Syncthing instances did not connect within 60 s")
            time.sleep(0.3)

    def _configure(self, dev: Device, other: Device, gui: int, listen: int, other_listen: int) -> None:
        path = self._home(dev) / "config.xml"
        tree = ET.parse(path)
        cfg = tree.getroot()
        g = cfg.find("gui")
        assert g is not None
        g.set("enabled", "true")
        g.set("tls", "false")
        _set(g, "address", f"127.0.0.1:{gui}")
        _set(g, "apikey", self.key)
        opts = cfg.find("options")
        assert opts is not None
        for tag, value in (("listenAddress", f"tcp://127.0.0.1:{listen}"), ("globalAnnounceEnabled", "false"),
                           ("localAnnounceEnabled", "false"), ("relaysEnabled", "false"), ("natEnabled", "false"),
                           ("urAccepted", "-1"), ("startBrowser", "false"), ("autoUpgradeIntervalH", "0"),
                           ("crashReportingEnabled", "false"), ("minHomeDiskFree", "0"), ("reconnectionIntervalS", "1")):
            for old in opts.findall(tag):
                opts.remove(old)
            _set(opts, tag, value)
        for old in cfg.findall("device") + cfg.findall("folder"):
            cfg.remove(old)
        # Only the laptop dials: when both dial at once (start, resume) the crossed connections wait out
        # Syncthing's 20 s hello timeout; with discovery off, "dynamic" means this side never dials.
        dials = dev is self.a
        for d, addr in ((dev, "dynamic"), (other, f"tcp://127.0.0.1:{other_listen}" if dials else "dynamic")):
            el = ET.SubElement(cfg, "device", id=self.ids[d.name], name=d.name, compression="metadata",
                               introducer="false")
            _set(el, "address", addr)
        folder = ET.SubElement(cfg, "folder", id=self.FOLDER, label=self.FOLDER, path=str(dev.vault),
                               type="sendreceive", rescanIntervalS="3600", fsWatcherEnabled="true",
                               fsWatcherDelayS="1", ignorePerms="false", autoNormalize="true")
        for d in (dev, other):
            ET.SubElement(folder, "device", id=self.ids[d.name])
        _set(folder, "maxConflicts", "10")
        tree.write(path)

    def _api(self, dev: Device, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(f"http://127.0.0.1:{self.gui[dev.name]}{path}", method=method,
                                     headers={"X-API-Key": self.key})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def _idle(self) -> bool:
        for d, o in ((self.a, self.b), (self.b, self.a)):
            st = self._api(d, f"/rest/db/status?folder={self.FOLDER}")
            if st["state"] != "idle" or st["needTotalItems"]:
                return False
            comp = self._api(d, f"/rest/db/completion?folder={self.FOLDER}&device={self.ids[o.name]}")
            if comp["completion"] < 100:
                return False
        return True

    def settle(self) -> None:
        """Rescan both and wait until both are idle, nothing is needed, and the vaults match for a
        moment (Syncthing's watcher batches changes for a second)."""
        for d in (self.a, self.b):
            self._api(d, f"/rest/db/scan?folder={self.FOLDER}", "POST")
        deadline = time.monotonic() + SETTLE_S
        same_since: float | None = None
        while time.monotonic() < deadline:
            time.sleep(0.25)
            if self._idle() and self.a.files() == self.b.files():
                same_since = same_since or time.monotonic()
                if time.monotonic() - same_since > 1.25:  # the watcher's delay (1 s) and a poll
                    return
            else:
                same_since = None
        raise AssertionError(f"Syncthing did not settle within {SETTLE_S} s")

    def sync_one(self, dev: Device) -> None:
        self.settle()

    def go_offline(self, dev: Device) -> None:
        other = self.b if dev is self.a else self.a
        self._api(dev, f"/rest/system/pause?device={self.ids[other.name]}", "POST")
        self._api(other, f"/rest/system/pause?device={self.ids[dev.name]}", "POST")

    def go_online(self, dev: Device) -> None:
        other = self.b if dev is self.a else self.a
        self._api(dev, f"/rest/system/resume?device={self.ids[other.name]}", "POST")
        self._api(other, f"/rest/system/resume?device={self.ids[dev.name]}", "POST")

    def stop(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is None:
                dev = self.a if name == self.a.name else self.b
                try:
                    self._api(dev, "/rest/system/shutdown", "POST")
                    p.wait(timeout=15)
                except (OSError, subprocess.TimeoutExpired):
                    p.kill()
                    p.wait(timeout=15)
            if p.stdout:
                p.stdout.close()


def _set(parent: ET.Element, tag: str, text: str) -> None:
    el = parent.find(tag)
    if el is None:
        el = ET.SubElement(parent, tag)
    el.text = text


ENGINES: dict[str, Any] = {"git": GitEngine, "syncthing": SyncthingEngine}


# -- the scenarios -------------------------------------------------------------------------------------

class Run:
    """One scenario on one engine: a fresh pair of devices, the writes, the settle, the checks."""

    def __init__(self, root: Path, engine: str) -> None:
        # The laptop's agent writes through the CLI, the desktop's through MCP.
        self.a, self.b = Device(root, "laptop"), Device(root, "desktop", via="mcp")
        self.engine = ENGINES[engine](root, self.a, self.b)
        self.acked: dict[str, str] = {}  # memory id -> the device that acknowledged it
        self.deleted: set[str] = set()
        # device -> ids it deleted that this round's sync must bring back (and its doctor name)
        self.back: dict[str, set[str]] = {}
        self.violations: list[str] = []
        self.round = 0
        self.counts = dict.fromkeys(("writes", "mcpWrites", "conflicts", "repaired", "gitMarkers", "tempFiles", "lost",
                                     "toldBack"), 0)

    def scenario(self, scenario: str, *, rounds: int = 1, n: int = 2) -> dict[str, Any]:
        """One scenario on this pair, counted from zero. The pair may have run others before: their
        memories stay acknowledged, so a later scenario losing one of them is a violation too."""
        t0 = time.monotonic()
        self.violations = []
        self.back = {}
        self.counts = dict.fromkeys(self.counts, 0)
        for self.round in range(rounds):
            SCENARIOS[scenario](self, n)
            self.check()
        return {"engine": self.engine.name, "scenario": scenario, **self.counts, "violations": list(self.violations),
                "wall_s": round(time.monotonic() - t0, 1)}

    def __enter__(self) -> Run:
        self.a.cli("init", str(self.a.vault))
        self.engine.setup()
        self.engine.settle()
        both(self.devices, Device.start)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            both(self.devices, Device.stop)
        finally:
            self.engine.stop()

    @property
    def devices(self) -> tuple[Device, Device]:
        return self.a, self.b

    def write(self, dev: Device, *args: str) -> dict[str, Any]:
        if self.round and "--content" in args:  # not the content of an earlier round (a DuplicateContent)
            i = args.index("--content") + 1
            args = (*args[:i], f"{args[i]} Round {self.round}.", *args[i + 1:])
        res = dev.write(*args)
        self.counts["writes"] += 1
        self.counts["mcpWrites"] += dev.mcp is not None
        if "id" in res and args[0] in ("remember", "evolve"):
            self.acked[str(res["id"])] = dev.name
        return dict(res)

    def remember(self, dev: Device, title: str, content: str, type_: str = "fact") -> dict[str, Any]:
        if self.round:  # a later round's memories are new ones, not the first round's keys again
            title = f"{title} {self.round}"
        return self.write(dev, "remember", "--type", type_, "--title", title, "--content", content)

    def violate(self, msg: str) -> None:
        self.violations.append(f"{self.engine.name}: {msg}")

    # -- what must hold -----------------------------------------------------------------------------
    def check(self) -> None:
        self.engine.settle()
        fa, fb = self.a.files(), self.b.files()
        if fa != fb:
            self.violate(f"the vaults differ: {sorted(set(fa.items()) ^ set(fb.items()))[:4]}")
        temps = [p for p in fa if p.endswith(".tmp") or "/.hive-brain/staging/" in f"/{p}"]
        if temps:
            self.violate(f"temp files carried: {temps[:3]}")
        self.counts["tempFiles"] += sum(1 for d in (self.a, self.b) for _ in d.vault.rglob(".syncthing.*.tmp"))
        docs = both(self.devices, lambda d: d.cli("doctor"))
        self.check_told_back(docs)
        found = {n: sorted((c["kind"], c.get("id") or c.get("path")) for c in doc["conflicts"]) for n, doc in docs.items()}
        if found[self.a.name] != found[self.b.name]:
            self.violate(f"doctor differs: {found}")
        conflicts = docs[self.a.name]["conflicts"]
        self.counts["conflicts"] += len(conflicts)
        markers = [c["path"] for c in conflicts if c["kind"] == "gitMarkers"]
        self.counts["gitMarkers"] += len(markers)
        if markers:
            self.check_markers_not_indexed(markers)
            self.resolve_markers(markers)
            self.engine.settle()
        changed = bool(markers)
        plans = both(self.devices, lambda d: d.cli("repair-conflicts"))
        pa, pb = (sorted(json.dumps(p, sort_keys=True) for p in plans[d.name]["pairs"]) for d in (self.a, self.b))
        if pa != pb:
            self.violate(f"repair-conflicts plans differ: {pa[:2]} / {pb[:2]}")
        if plans[self.a.name]["pairs"]:
            # Confirmed on both devices before either syncs (two people, or one on each machine): the
            # two repairs must be the same notes, or the engine makes a new conflict of them. Syncthing
            # is paused meanwhile: running, it would carry one device's repair to the other first.
            self.engine.go_offline(self.a)
            fixed = both(self.devices, lambda d: d.cli("repair-conflicts", "--confirm"))
            self.counts["repaired"] += len(fixed[self.a.name].get("changed", []))
            for name, res in fixed.items():
                if res.get("remaining"):
                    self.violate(f"{name}: repair left {res['remaining']} conflicts")
            wrote = {d.name: {p: d.files().get(p) for p in fixed[d.name].get("changed", [])} for d in (self.a, self.b)}
            if wrote[self.a.name] != wrote[self.b.name]:
                self.violate(f"the two devices' repairs wrote different notes: {sorted(wrote[self.a.name])[:3]}")
            self.engine.go_online(self.a)
            self.engine.settle()
            changed = True
        # Nothing resolved or repaired: the vaults are as the first doctor found them.
        after = both(self.devices, lambda d: d.cli("doctor")) if changed else docs
        for name, doc in after.items():
            left = [c for c in doc["conflicts"] if c["kind"] != "syncCopy"]
            if left:
                self.violate(f"{name}: conflicts after repair: {left[:2]}")
        self.check_devices()

    def check_told_back(self, docs: dict[str, Any]) -> None:
        """A device is told of the memories it deleted that the sync brought back (and no other device,
        of nothing else); it keeps them (``doctor --keep``), after which they are not named again."""
        for d in self.devices:
            named = {x["id"] for x in docs[d.name].get("cameBack", [])}
            want = self.back.get(d.name, set())
            if named != want:
                self.violate(f"{d.name}: doctor names {sorted(named)} as deleted here and back, expected {sorted(want)}")
            self.counts["toldBack"] += len(named & want)
            if named & want:
                res = d.cli("doctor", "--keep", *sorted(named & want))
                if res.get("cameBack"):
                    self.violate(f"{d.name}: still named after --keep: {res['cameBack'][:2]}")
        self.back = {}

    def check_markers_not_indexed(self, paths: list[str]) -> None:
        for d in (self.a, self.b):
            for h in d.cli("recall", "HEAD origin main vault backup", "--scope", "full-vault", "--limit", "20")["hits"]:
                text = h.get("passage", {}).get("text", "")
                if "<<<<<<<" in text or ">>>>>>>" in text:
                    self.violate(f"{d.name}: git markers indexed in {h['path']}")

    def resolve_markers(self, paths: list[str]) -> None:
        """What a person does with a conflicted note: keep both sides (ours first), markers gone; the
        duplicates that leaves are the repair's. A note whose frontmatter merged keeps our side."""
        for rel in paths:
            p = self.a.vault / rel
            out: list[str] = []
            side: str | None = None
            for line in p.read_text(encoding="utf-8").split("\n"):
                if line.startswith("<<<<<<< "):
                    side = "ours"
                elif line == "=======" and side:
                    side = "theirs"
                elif line.startswith(">>>>>>> ") and side:
                    side = None
                elif side == "theirs" and out and out[0] == "---" and out.count("---") < 2:
                    continue  # frontmatter: one side only
                else:
                    out.append(line)
            p.write_text("\n".join(out), encoding="utf-8")

    def check_devices(self) -> None:
        probes = both(self.devices, Device.probe)
        for name, pr in probes.items():
            for problem in pr["problems"]:
                self.violate(f"{name}: index: {problem}")
            bad = [p for p in pr["indexed"] if ".syncthing." in p or ".tmp" in p or p.startswith(".hive-brain/")]
            if bad:
                self.violate(f"{name}: temp files indexed: {bad[:3]}")
            ids = [m["id"] for m in pr["memories"]]
            twice = sorted({i for i in ids if ids.count(i) > 1})
            if twice:
                self.violate(f"{name}: ids on more than one note after repair: {twice[:3]}")
            lost = set(self.acked) - set(ids) - self.deleted
            if lost:
                self.counts["lost"] += len(lost)
                self.violate(f"{name}: acknowledged writes lost: {sorted(lost)[:3]}")
            heads: dict[str, int] = {}
            for m in pr["memories"]:
                if m["status"] == "active":
                    heads[m["key"]] = heads.get(m["key"], 0) + 1
            two = [k for k, n in heads.items() if n > 1]
            if two:
                self.violate(f"{name}: keys with two active heads: {two[:3]}")
        tops = both(self.devices, lambda d: [d.top(q) for q in QUESTIONS])
        for q, ta, tb in zip(QUESTIONS, tops[self.a.name], tops[self.b.name], strict=True):
            if ta != tb:
                self.violate(f"recall {q!r} differs: {ta} / {tb}")
        alive = both(self.devices, Device.server_alive)
        for d in (self.a, self.b):
            if not alive[d.name]:
                logs = sorted(d.state.rglob("server.log"))
                last = logs[0].read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:] if logs else []
                self.violate(f"{d.name}: the server started at the beginning is gone: {' | '.join(last)}")


def both_remember(r: Run, n: int) -> None:
    for dev in (r.a, r.b):
        r.engine.go_offline(dev)
    for i in range(n):
        r.remember(r.a, f"Laptop fact {i}", f"The laptop's service zqlap{i} listens on port {8000 + i}.")
        r.remember(r.b, f"Desktop fact {i}", f"The desktop's service zqdesk{i} listens on port {9000 + i}.")
    r.remember(r.a, "Deploy region", "Production deploys go to region eu-west-1.", "decision")
    r.remember(r.b, "Deploy region", "Production deploys go to region us-east-2.", "decision")
    for dev in (r.a, r.b):
        r.engine.go_online(dev)


def both_evolve(r: Run, n: int) -> None:
    m = r.remember(r.a, "CI runner", "Continuous integration runs on GitHub Actions.", "decision")
    r.engine.settle()
    r.engine.go_offline(r.a)
    r.write(r.a, "evolve", "--memory-id", m["id"], "--content", "Continuous integration runs on Buildkite.")
    time.sleep(1.1)  # `updated` has whole seconds: the desktop's is the newer version
    r.write(r.b, "evolve", "--memory-id", m["id"], "--content", "Continuous integration runs on CircleCI.")
    r.engine.go_online(r.a)


def delete_vs_update(r: Run, n: int) -> None:
    m = r.remember(r.a, "Package mirror", "The package mirror is at mirror.internal.")
    r.engine.settle()
    r.engine.go_offline(r.a)
    r.write(r.a, "delete", "--memory-id", m["id"], "--confirm")
    r.write(r.b, "update", "--memory-id", m["id"], "--content", "The package mirror moved to mirror2.internal.")
    r.engine.go_online(r.a)
    # Semantics (docs/reliability.md): the update wins, the memory stays; both engines restore the
    # changed note over a deletion, and the laptop, which deleted it, is told.
    r.back[r.a.name] = {m["id"]}


def hand_edit_vs_agent(r: Run, n: int) -> None:
    m = r.remember(r.a, "Restart procedure", "Restart the api with systemctl restart api.", "procedure")
    r.engine.settle()
    r.engine.go_offline(r.a)
    p = r.a.vault / m["path"]
    text = p.read_text(encoding="utf-8")
    tmp = p.with_name(f".{p.name}.swp")
    tmp.write_text(text.replace("systemctl restart api.", "systemctl restart api.\nThen check the health page."),
                   encoding="utf-8")
    os.replace(tmp, p)  # an editor's atomic save
    time.sleep(1.1)
    r.write(r.b, "update", "--memory-id", m["id"], "--content", "Restart the api with docker compose restart api.")
    r.engine.go_online(r.a)


def undo_old_version(r: Run, n: int) -> None:
    m = r.remember(r.a, "Deploy day", "We deploy on Fridays.", "decision")
    r.engine.settle()
    old = (r.b.vault / m["path"]).read_bytes()
    r.write(r.a, "evolve", "--memory-id", m["id"], "--content", "We deploy on Thursdays.")
    r.engine.settle()
    p = r.b.vault / m["path"]
    p.write_bytes(old)  # an undo (editor history, `git checkout`, a restored backup) on the desktop


def half_written(r: Run, n: int) -> None:
    """A note that arrives cut in the middle of its frontmatter (a tool writing in place), then whole."""
    m = r.remember(r.a, "Cache TTL", "The API cache TTL is 300 seconds.")
    r.engine.settle()
    p = r.a.vault / "Projects" / "half-written note.md"
    whole = "---\ntitle: Half written\ntags: [ops]\n---\n# Half written\nThe on-call phone is zqoncall.\n"
    with open(p, "w", encoding="utf-8") as f:
        f.write(whole[:20])
        f.flush()
        r.engine.sync_one(r.a)  # delivered while half of it is on disk
        f.write(whole[20:])
    r.write(r.b, "update", "--memory-id", m["id"], "--content", "The API cache TTL is 600 seconds.")


def offline_then_back(r: Run, n: int) -> None:
    m = r.remember(r.a, "Release cadence", "We release every Tuesday.", "decision")
    r.engine.settle()
    r.engine.go_offline(r.b)
    for i in range(n * 3):
        r.remember(r.a, f"Runbook step {i}", f"Step zqstep{i} of the runbook restarts worker {i}.", "procedure")
    r.write(r.b, "update", "--memory-id", m["id"], "--content", "We release every second Tuesday.")
    r.remember(r.b, "Offline note", "Written on the desktop while offline: zqoffline.")
    r.engine.go_online(r.b)


SCENARIOS: dict[str, Callable[[Run, int], None]] = {
    "both-remember": both_remember, "both-evolve": both_evolve, "delete-vs-update": delete_vs_update,
    "hand-edit-vs-agent": hand_edit_vs_agent, "undo-old-version": undo_old_version, "half-written": half_written,
    "offline-then-back": offline_then_back,
}


def run_scenario(root: Path, engine: str, scenario: str, *, rounds: int = 1, n: int = 2) -> dict[str, Any]:
    """One scenario on a fresh pair (the benchmark's rows; ``wall_s`` counts the pair's start and stop)."""
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with Run(root, engine) as r:
        row = r.scenario(scenario, rounds=rounds, n=n)
    return {**row, "wall_s": round(time.monotonic() - t0, 1)}


# -- the benchmark entry points (benchmarks.common conventions) ---------------------------------------

def run(cfg: Any, *, engines: tuple[str, ...] = ("git", "syncthing"), rounds: int = 1,
        scenarios: tuple[str, ...] = tuple(SCENARIOS)) -> dict[str, Any]:
    from .common import log, temp_dir

    rows, skipped = [], {}
    with temp_dir("hive-brain-sync-") as tmp:
        os.environ["HOME"] = str(tmp / "home")
        os.environ["HIVE_BRAIN_MODEL_DIR"] = str(tmp / "no-model")  # lexical: the same on both devices
        for engine in engines:
            why = ENGINES[engine].available()
            if why:
                skipped[engine] = why
                continue
            for sc in scenarios:
                log(f"sync: {engine} {sc}")
                rows.append(run_scenario(tmp / f"{engine}-{sc}", engine, sc, rounds=rounds))
    return {"rows": rows, "skipped": skipped, "rounds": rounds}


def report(result: dict[str, Any], console: Any) -> None:
    from .common import print_table

    rows = [[r["engine"], r["scenario"], r["writes"], r["mcpWrites"], r["conflicts"], r["gitMarkers"], r["repaired"],
             r["tempFiles"], r["toldBack"], r["lost"], len(r["violations"]), r["wall_s"]] for r in result["rows"]]
    print_table(f"Two devices, real sync engines ({result['rounds']} round(s) per scenario)",
                ["engine", "scenario", "writes", "via MCP", "conflicts", "git markers", "repaired", "st temp files",
                 "told back", "lost", "violations", "s"],
                rows, console)
    for engine, why in result["skipped"].items():
        console.print(f"{engine}: skipped ({why})")
    for r in result["rows"]:
        for v in r["violations"][:10]:
            console.print(f"[red]{r['scenario']}: {v}[/]", markup=True)


def summary_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    from .common import summary_row

    bad = sum(len(r["violations"]) for r in result["rows"])
    return [summary_row(NAME, "two devices, git + Syncthing", "violations", bad, target="0",
                        status="pass" if not bad else "FAIL")]


def _extra(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--engines", default="git,syncthing")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))


if __name__ == "__main__":
    from .common import standalone_main

    sys.exit(standalone_main(sys.modules[__name__], extra_args=_extra,
                             kwargs_from_args=lambda a: {"engines": tuple(a.engines.split(",")), "rounds": a.rounds,
                                                         "scenarios": tuple(a.scenarios.split(","))}))
