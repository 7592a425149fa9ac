"""Hostile input: how many fuzzed inputs end in a traceback (issue 16, the numbers in docs/reliability.md).

Seeded random strings built from what breaks text handling (NUL and other control characters, lone
surrogates, invalid UTF-8, every tantivy query-syntax character, YAML markers and tags, path
traversal, long runs, mixed scripts) go to four doors, each in a fresh lexical-only vault:

- ``remember``: ``engine.memory.remember`` with fuzzed title, content, tags, project, key and type;
  an accepted write must be readable back with ``get`` (else it counts as "unreachable");
- ``recall``: ``engine.recall`` with a fuzzed query and fuzzed tag/project/type filters;
- ``cli``: ``hive-brain remember/recall/get/update`` processes with fuzzed argv bytes (invalid UTF-8
  arrives as lone surrogates) and ``batch`` with a fuzzed JSON file;
- ``socket``: the server's request handler with fuzzed request lines (partial JSON, wrong types,
  bad UTF-8, ``\\ud800`` escapes, huge lines), memory writes through the server included.

A crash is an exception outside ``HiveBrainError`` (in-process), a ``Traceback`` on stderr (CLI) or an
``InternalError`` response (socket).

    python -m benchmarks.hostile_input [--n 500] [--cli-n 100] [--seed 16]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

PIECES = [
    "\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b[31m", "\x7f", "\x85", "\x9b", "\t", "\n", "\r\n", "\r",
    "\ud800", "\udfff", "\udc80", "\udcff", "\ud83d", "\ufeff", "\ufffe", "\uffff", "\u2028", "\u202e",
    "+", "-", "&&", "||", "!", "(", ")", "{", "}", "[", "]", "^", '"', "~", "*", "?", ":", "\\", "/", "'", "`",
    " AND ", " OR ", " NOT ", " TO ", "title:", "tags:x", "[a TO b]", "{1 TO 2}", "field:\"phrase\"~2", "x^3", "*:*",
    "---", "---\n", "!!python/object:os.system", "!!python/object/apply:os.system ['id']", "&a", "*a", "%YAML 1.1",
    "{a: [b, {c: d}]}", "- - - x", "key: value", "#", "|", ">",
    "../", "../../etc/passwd", "/etc/passwd", "..", "~/", "C:\\", "%2e%2e%2f", "a/b", "Memory/", ".hive-brain/",
    "pnpm", "deploy", "the", "😀", "中文", "עברית", "e\u0301", "ǅ", "\u200b", " ", "  ", "x" * 300,
]


def fuzz_text(rng: random.Random, max_pieces: int = 8) -> str:
    parts = []
    for _ in range(rng.randint(0, max_pieces)):
        r = rng.random()
        if r < 0.6:
            parts.append(rng.choice(PIECES))
        elif r < 0.8:
            parts.append("".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(1, 6))))
        elif r < 0.95:
            parts.append("".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 3))))
        else:
            parts.append(rng.choice(["a", "\x00", "\ud800", "("]) * rng.randint(1000, 20000))
    return "".join(parts)


def fuzz_bytes(rng: random.Random) -> bytes:
    """A string as argv bytes: valid UTF-8 where possible, raw invalid sequences mixed in."""
    out = b""
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        if r < 0.5:
            out += fuzz_text(rng, 3).encode("utf-8", "surrogatepass" if rng.random() < 0.5 else "replace")
        elif r < 0.8:
            out += rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f", b"\x80\x80", b"\xfe\xfe"])
        else:
            out += bytes(rng.randint(1, 255) for _ in range(rng.randint(1, 8)))
    return out.replace(b"\x00", b"")  # argv cannot carry NUL


class Counter:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tried = 0
        self.crashed = 0
        self.examples: list[str] = []

    def crash(self, what: str) -> None:
        self.crashed += 1
        if len(self.examples) < 5:
            self.examples.append(what[-600:])

    def row(self) -> dict[str, Any]:
        return {"door": self.name, "tried": self.tried, "crashed": self.crashed, "examples": self.examples}


def _in_process(c: Counter, fn: Callable[[], Any]) -> Any:
    from hive_brain.errors import HiveBrainError

    c.tried += 1
    try:
        return fn()
    except HiveBrainError:
        return None
    except Exception:  # noqa: BLE001 - counting exactly these
        c.crash(traceback.format_exc())
        return None


def fresh_vault(base: Path, name: str) -> Path:
    from hive_brain.config import resolve
    from hive_brain.store.vault import init_vault

    os.environ["HIVE_BRAIN_STATE_DIR"] = str(base / f"state-{name}")
    root = base / f"vault-{name}"
    init_vault(root, resolve(vault=str(root)))
    os.environ["HIVE_BRAIN_VAULT"] = str(root)
    return root


def door_remember(base: Path, rng: random.Random, n: int) -> tuple[Counter, int, int]:
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput

    fresh_vault(base, "remember")
    eng = Engine.open()
    c = Counter("remember")
    accepted = unreachable = 0
    for i in range(n):
        def one(i: int = i) -> Any:
            kw: dict[str, Any] = {"type": rng.choice(["fact", "fact", fuzz_text(rng, 2)]),
                                  "title": f"t{i} {fuzz_text(rng, 3)}", "content": f"c{i} {fuzz_text(rng)}"}
            if rng.random() < 0.4:
                kw["tags"] = [fuzz_text(rng, 2) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.3:
                kw["project"] = fuzz_text(rng, 2)
            if rng.random() < 0.2:
                kw["memory_key"] = fuzz_text(rng, 3)
            return eng.memory.remember(MemoryInput(**kw))

        res = _in_process(c, one)
        if res and res.get("status") == "created":
            accepted += 1
            try:
                eng.memory.get(res["id"])
            except Exception:  # noqa: BLE001
                unreachable += 1
    return c, accepted, unreachable


def door_recall(base: Path, rng: random.Random, n: int) -> Counter:
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput

    fresh_vault(base, "recall")
    eng = Engine.open()
    for i in range(5):
        eng.memory.remember(MemoryInput(type="fact", title=f"Fact {i}", content=f"We deploy with pnpm, fact {i}.",
                                        tags=["tooling"], project="hive"))
    c = Counter("recall")
    for _ in range(n):
        opts: dict[str, Any] = {}
        if rng.random() < 0.3:
            opts["tags"] = [fuzz_text(rng, 2)]
        if rng.random() < 0.2:
            opts["project"] = fuzz_text(rng, 2)
        if rng.random() < 0.2:
            opts["types"] = [fuzz_text(rng, 2)]
        q = fuzz_text(rng)

        def recall(q: str = q, opts: dict[str, Any] = opts) -> Any:
            return eng.recall(q, semantic=False, **opts)

        _in_process(c, recall)
    return c


def door_cli(base: Path, rng: random.Random, n: int) -> Counter:
    root = fresh_vault(base, "cli")
    env = {**os.environ, "HIVE_BRAIN_VAULT": str(root)}
    c = Counter("cli")
    for i in range(n):
        kind = i % 5
        argv: list[bytes]
        stdin = None
        if kind == 0:
            argv = [b"remember", b"--type", b"fact", b"--title", b"t%d " % i + fuzz_bytes(rng),
                    b"--content", fuzz_bytes(rng), b"--tags", fuzz_bytes(rng)]
        elif kind == 1:
            argv = [b"recall", fuzz_bytes(rng), b"--lexical"]
        elif kind == 2:
            argv = [b"get", b"--memory-id", fuzz_bytes(rng)]
        elif kind == 3:
            argv = [b"update", b"--memory-id", fuzz_bytes(rng), b"--tags", fuzz_bytes(rng)]
        else:
            rec = {"type": "fact", "title": f"b{i} {fuzz_text(rng, 3)}", "content": fuzz_text(rng)}
            text = json.dumps([rec], ensure_ascii=rng.random() < 0.5)
            stdin = text.encode("utf-8", "surrogatepass") if rng.random() < 0.7 else fuzz_bytes(rng)
            argv = [b"batch", b"--file", b"-"]
        for as_json in (False, True):
            c.tried += 1
            p = subprocess.run([sys.executable.encode(), b"-m", b"hive_brain", *argv, *([b"--json"] if as_json else [])],
                               input=stdin, capture_output=True, env=env, timeout=120)
            err = p.stderr.decode("utf-8", "replace")
            if "Traceback" in err or p.returncode not in (0, 1, 2):
                c.crash(f"{argv!r}\n{err}")
    return c


WRITE_ARGS = ["inp", "memory_id", "content", "title", "tags", "project", "confidence", "status", "confirm", "force",
              "records", "x"]


def write_line(rng: random.Random) -> bytes:
    """A memory write through the server (``op: write``) with fuzzed names, types and text."""
    def value() -> Any:
        return rng.choice([fuzz_text(rng, 3), 5, 1.5, None, True, [fuzz_text(rng, 2)], {"a": 1}, [], -1,
                           {"type": "fact", "title": fuzz_text(rng, 2), "content": fuzz_text(rng)}])

    args = {k: value() for k in rng.sample(WRITE_ARGS, rng.randint(0, 4))}
    op = rng.choice(["remember", "evolve", "update", "delete", "batch", fuzz_text(rng, 1)])
    req = {"op": "write", "args": {"op": op, "args": args} if rng.random() < 0.9 else value()}
    return json.dumps(req, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def socket_line(rng: random.Random) -> bytes:
    r = rng.random()
    q = fuzz_text(rng)
    if r < 0.2:
        return write_line(rng)
    r = rng.random()
    if r < 0.25:
        return json.dumps({"op": "recall", "args": {"query": q, "limit": rng.choice([5, "5", -1, None, 1e9])}},
                          ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    if r < 0.4:
        val = rng.choice([q, 1, 1.5, None, True, [q], {"x": q}, -1, 10**30])
        key = rng.choice(["query", "agent", "tags", "project", "types", "limit", "as_of", "detail", "mode", "scope",
                          "budget", "now", "semantic", "drop_ratio", "pool", "abstain"])
        return json.dumps({"op": rng.choice(["recall", "answer"]), "args": {"query": "pnpm", key: val}}).encode(
            "utf-8", "surrogatepass")
    if r < 0.55:
        whole = json.dumps({"op": "answer", "args": {"query": q, "budget": rng.choice([100, 0, -5, "x", None])}})
        return whole[: rng.randint(0, len(whole))].encode("utf-8", "surrogatepass")
    if r < 0.7:
        return rng.choice([b"", b"{}", b"[]", b"null", b"1", b'"op"', b'{"op": 1}', b'{"op": "recall"}',
                           b'{"op": "recall", "args": []}', b'{"op": "catch_up", "args": {"timeout": "x"}}',
                           b'{"op": "catch_up", "args": {"timeout": -1}}', b'{"op": ["ping"]}', b"\xff\xfe{",
                           b'{"op": "recall", "args": {"query": "\\ud800"}}', b'{"op": "\\u0000"}'])
    if r < 0.85:
        return fuzz_bytes(rng)
    return json.dumps({"op": "recall", "args": {"query": "pnpm " * rng.randint(10_000, 300_000)}}).encode()


def door_socket(base: Path, rng: random.Random, n: int) -> Counter:
    from hive_brain.config import resolve
    from hive_brain.daemon.server import Server
    from hive_brain.engine import Engine
    from hive_brain.memory.model import MemoryInput

    fresh_vault(base, "socket")
    eng = Engine.open()
    eng.memory.remember(MemoryInput(type="fact", title="Deploy", content="We deploy with pnpm."))
    c = Counter("socket")
    with Server(resolve(), log_to_stderr=False) as srv:
        srv.wait_ready(60)
        for _ in range(n):
            line = socket_line(rng)
            c.tried += 1
            try:
                _op, resp = srv.handle(line)
            except Exception:  # noqa: BLE001
                c.crash(traceback.format_exc())
                continue
            err = resp.get("error") or {}
            if not resp.get("ok") and err.get("type") == "InternalError":
                c.crash(f"{line[:200]!r}: {err.get('message')}")
        c.tried += 1
        if srv.handle(b'{"op": "ping"}')[1].get("ok") is not True:
            c.crash("the server stopped answering")
    return c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=500, help="inputs per in-process door")
    ap.add_argument("--cli-n", type=int, default=100, help="CLI invocations (each runs with and without --json)")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--doors", default="remember,recall,cli,socket")
    args = ap.parse_args(argv)
    doors = set(args.doors.split(","))
    with tempfile.TemporaryDirectory(prefix="hb-hostile-") as tmp:
        base = Path(tmp)
        os.environ["HIVE_BRAIN_MODEL_DIR"] = str(base / "no-model")  # lexical: the doors, not the model
        os.environ["HIVE_BRAIN_AUTOSTART"] = "0"  # no background server left behind by the CLI door
        os.environ["HOME"] = str(base / "home")
        rows = []
        if "remember" in doors:
            c, accepted, unreachable = door_remember(base, random.Random(args.seed), args.n)
            rows.append({**c.row(), "accepted": accepted, "unreachable": unreachable})
        if "recall" in doors:
            rows.append(door_recall(base, random.Random(args.seed + 1), args.n).row())
        if "cli" in doors:
            rows.append(door_cli(base, random.Random(args.seed + 2), args.cli_n).row())
        if "socket" in doors:
            rows.append(door_socket(base, random.Random(args.seed + 3), args.n).row())
    for r in rows:
        extra = f", accepted {r['accepted']}, unreachable after accept {r['unreachable']}" if "accepted" in r else ""
        print(f"{r['door']:9} tried {r['tried']:5}  crashed {r['crashed']:4}{extra}")
        for ex in r["examples"][:2]:
            print("    " + ex.strip().splitlines()[-1][:200])
    print(json.dumps([{k: v for k, v in r.items() if k != "examples"} for r in rows]))
    return 0 if all(r["crashed"] == 0 and not r.get("unreachable") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
