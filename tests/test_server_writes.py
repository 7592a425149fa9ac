"""Writes through the running server (`hive_brain.writer`): real server processes, real sockets.

A write the server takes is the same write as in-process (same checks, same errors, same note);
anything the server cannot take is done in-process; a write the server took but never confirmed is
not done twice.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from hive_brain.config import resolve
from hive_brain.errors import WriteUnconfirmed
from hive_brain.rpc import client
from hive_brain.store.vault import open_vault
from hive_brain.writer import write

from .helpers import cli_as, count_calls, run
from .test_server import START_TIMEOUT, _paths, _serve, _stop


@pytest.fixture
def served(vault_path, tmp_path):
    state = open_vault(resolve()).state
    proc = _serve(tmp_path)
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        yield state
    finally:
        _stop(proc)


def _notes(vault: Path) -> list[str]:
    return sorted(str(p.relative_to(vault)) for p in (vault / "Memory").rglob("*.md"))


def test_remember_and_evolve_go_through_the_server(served, vault_path):
    res = run("remember", "--type", "decision", "--title", "Hosting", "--content", "The web app runs on quokkahost.")
    assert res["via"] == "server" and res["status"] == "created"
    assert (vault_path / res["path"]).read_text().count("quokkahost") == 1
    # Readers see it as soon as the writer hears back: no waiting for the watcher.
    assert _paths(served, "quokkahost") == [res["path"]]
    ev = run("evolve", "--memory-id", res["id"], "--content", "The web app moved to wombatcloud.")
    assert ev["via"] == "server" and ev["supersedes"] == res["id"]
    assert _paths(served, "wombatcloud") == [ev["path"]]
    got = run("get", "--memory-id", res["id"])
    assert got["meta"]["status"] == "superseded"


def test_the_server_refuses_what_in_process_refuses(served, vault_path):
    run("remember", "--type", "fact", "--title", "Port", "--content", "The api listens on 8443.")
    before = _notes(vault_path)
    dup = run("remember", "--type", "fact", "--title", "Port", "--content", "The api listens on 9443.", ok=False)
    assert dup["_exit"] == 1 and dup["error"] == "DuplicateKey" and "evolve" in dup["hint"]
    secret = run("remember", "--type", "fact", "--title", "Key", "--content",
                 "deploy key AKIAIOSFODNN7EXAMPLE", ok=False)
    assert secret["error"] == "SecretDetected" and "AKIAIOSFODNN7EXAMPLE" not in json.dumps(secret)
    bad = run("remember", "--type", "fact", "--title", "C", "--content", "x", "--confidence", "7", ok=False)
    assert bad["_exit"] == 2
    assert _notes(vault_path) == before


def test_an_agent_write_through_the_server_stays_that_agents(served, vault_path):
    res = cli_as("remember", "--type", "lesson", "--title", "Flaky test", "--content", "Retry the narwhal suite once.",
                 agent="bob")
    assert res["via"] == "server" and res["layer"] == "private" and res["path"].startswith("Agents/bob/")
    assert _paths(served, "narwhal") == []
    assert _paths(served, "narwhal", agent="bob") == [res["path"]]


def test_enforcement_mode_writes_stay_in_process(served, vault_path):
    res = cli_as("remember", "--type", "lesson", "--title", "Own", "--content", "Kept by the ocelot agent.",
                 agent="ocelot", enforce=True)
    assert res["via"] == "local" and res["path"].startswith("Agents/ocelot/")


def test_a_server_in_enforcement_mode_takes_no_writes(vault_path, tmp_path, monkeypatch):
    monkeypatch.setenv("HIVE_BRAIN_AGENT_SCOPED_PERMISSIONS", "1")
    state = open_vault(resolve()).state
    before = _notes(vault_path)
    proc = _serve(tmp_path)
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        with pytest.raises(client.WritesRefused):
            client.call(state, "write", {"op": "remember", "agent": "mallory",
                                         "args": {"inp": {"type": "fact", "title": "t", "content": "c"}}}, timeout=10)
    finally:
        _stop(proc)
    assert _notes(vault_path) == before


class _FakeServer:
    """A socket at the vault's server address that answers every request with `reply` (None: read
    the request, then hang up without answering)."""

    def __init__(self, state: Path, reply: dict | None) -> None:
        self.path = client.socket_path(state)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(4)
        self.reply = reply
        state.mkdir(parents=True, exist_ok=True)
        self.ready = state / client.READY_NAME
        self.ready.touch()
        self.requests: list[dict] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.requests.append(json.loads(conn.makefile("rb").readline()))
                if self.reply is not None:
                    conn.sendall(json.dumps(self.reply).encode() + b"\n")

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)
        self.ready.unlink()


def _remember_args(title: str) -> dict:
    return {"inp": {"type": "fact", "title": title, "content": f"{title} is a fact about pangolins."}}


def test_an_older_server_without_writes_means_in_process(vault_path):
    settings = resolve()
    fake = _FakeServer(open_vault(settings).state,
                       {"ok": False, "error": {"type": "UsageError", "message": "unknown op 'write'", "hint": None}})
    try:
        res = write(settings, "remember", _remember_args("Old server"), local=lambda: _local(settings))
    finally:
        fake.close()
    assert res["via"] == "local" and res["status"] == "created" and len(fake.requests) == 1


def test_a_write_the_server_took_but_never_confirmed_is_not_done_twice(vault_path):
    settings = resolve()
    before = _notes(vault_path)
    fake = _FakeServer(open_vault(settings).state, None)
    try:
        with pytest.raises(WriteUnconfirmed, match="may have been applied"):
            write(settings, "remember", _remember_args("Lost answer"), local=lambda: _local(settings))
    finally:
        fake.close()
    assert fake.requests[0]["op"] == "write" and _notes(vault_path) == before


def test_a_stale_socket_means_in_process(vault_path):
    settings = resolve()
    state = open_vault(settings).state
    path = client.socket_path(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file stays; nobody listens (a server killed with -9)
    (state / client.READY_NAME).touch()  # and so does its ready marker
    res = write(settings, "remember", _remember_args("Stale socket"), local=lambda: _local(settings))
    assert res["via"] == "local" and res["status"] == "created"


def _local(settings):
    from hive_brain.engine import Engine

    return Engine.from_settings(settings).memory


def test_a_write_through_the_server_loads_no_memory_layer(served):
    """The point of writing through the server: this process imports neither YAML nor the index."""
    import subprocess
    import sys

    code = ("import sys\nfrom hive_brain.cli.app import main\n"
            "try:\n    main(['remember', '--type', 'fact', '--title', 'Light', '--content', 'Light as a feather.', '--json'])\n"
            "except SystemExit:\n    pass\n"
            "heavy = ('yaml', 'tantivy', 'hive_brain.engine', 'hive_brain.memory.store', 'hive_brain.index.indexer')\n"
            "print(','.join(m for m in heavy if m in sys.modules), file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=60)
    assert json.loads(p.stdout)["via"] == "server"
    assert p.stderr.strip() == ""


def test_update_and_delete_go_through_the_server(served, vault_path):
    res = run("remember", "--type", "fact", "--title", "Editor", "--content", "The team edits in axolotl-vim.")
    up = run("update", "--memory-id", res["id"], "--tags", "editor,tools")
    assert up["via"] == "server"
    assert "editor" in (vault_path / res["path"]).read_text()
    refused = run("delete", "--memory-id", res["id"], ok=False)
    assert refused["error"] == "NotConfirmed" and (vault_path / res["path"]).exists()
    gone = run("delete", "--memory-id", res["id"], "--confirm")
    assert gone["via"] == "server" and not (vault_path / res["path"]).exists()
    assert _paths(served, "axolotl") == []


HAND_NOTE = """---
id: mem-01handwritten0000000000001
type: decision
title: Queue broker
memory_key: decision/queue-broker
layer: shared
status: active
created: '2026-11-30T10:00:00Z'
updated: '2026-11-30T10:00:00Z'
---

Jobs go through RabbitMQ.
"""


def test_a_note_written_by_hand_a_moment_ago_can_be_evolved_through_the_server(served, vault_path):
    """The server re-reads only the notes its watcher saw change; a note saved an instant before the
    write (its event not delivered yet) is still found: a miss walks the vault before "not found"."""
    run("remember", "--type", "fact", "--title", "Warm", "--content", "The server has written once.")
    note = vault_path / "Memory" / "Distillations" / "Agent Memory" / "Queue broker.md"
    note.write_text(HAND_NOTE, encoding="utf-8")
    ev = run("evolve", "mem-01handwritten0000000000001", "--content", "Jobs go through NATS now.")
    assert ev["via"] == "server" and ev["supersedes"] == "mem-01handwritten0000000000001"
    assert _paths(served, "nats") == [ev["path"]]


class _SpyCatalog:
    def __init__(self) -> None:
        self.calls: list[list[str] | None] = []

    def refresh(self, *, only: list[str] | None = None) -> dict:
        self.calls.append(only)
        return {}


def test_the_server_refreshes_only_what_its_watcher_saw(vault_path):
    from hive_brain.daemon.indexing import IndexingLoop

    settings = resolve()
    loop = IndexingLoop(settings, open_vault(settings), threading.Event())
    cat = _SpyCatalog()
    assert loop.refresh_catalog(cat) is True and cat.calls[-1] is None  # no watcher: always a walk
    loop.mark("Memory/a.md")
    assert loop.refresh_catalog(cat) is True and cat.calls[-1] is None
    loop.observer = object()  # as if watching from now on
    loop.mark("", is_dir=True)  # what start_watcher says
    assert loop.refresh_catalog(cat) is True and cat.calls[-1] is None  # nothing read since it started
    loop.mark("Memory/a.md")
    loop.mark("Memory/b.md")
    assert loop.refresh_catalog(cat) is False and cat.calls[-1] == ["Memory/a.md", "Memory/b.md"]
    assert loop.refresh_catalog(cat) is False and cat.calls[-1] == []  # read: forgotten
    loop.mark("Projects", is_dir=True)  # a folder moved in: its notes were never named
    loop.mark("Memory/c.md")
    assert loop.refresh_catalog(cat) is True and cat.calls[-1] is None
    assert loop.refresh_catalog(cat) is False and cat.calls[-1] == []


def test_an_event_during_a_refresh_stays_marked(vault_path):
    from hive_brain.daemon.indexing import IndexingLoop

    settings = resolve()
    loop = IndexingLoop(settings, open_vault(settings), threading.Event())
    loop.observer = object()
    loop.refresh_catalog(_SpyCatalog())  # the first one walks

    class Racing(_SpyCatalog):
        def refresh(self, *, only: list[str] | None = None) -> dict:
            loop.mark("Memory/a.md")  # saved again while the catalog was reading it
            return super().refresh(only=only)

    loop.mark("Memory/a.md")
    loop.refresh_catalog(Racing())
    cat = _SpyCatalog()
    loop.refresh_catalog(cat)
    assert cat.calls == [["Memory/a.md"]]


def test_a_write_that_misses_an_id_after_a_partial_refresh_walks_first(vault_path):
    """In-process with a refresh that reads nothing (the watcher has not reported the note yet)."""
    from hive_brain.engine import Engine

    eng = Engine.open(vault_path)
    eng.memory.remember(__import__("hive_brain.memory.model", fromlist=["MemoryInput"]).MemoryInput(
        type="fact", title="First", content="Something to have a catalog."))
    (vault_path / "Memory" / "Distillations" / "Agent Memory" / "Queue broker.md").write_text(HAND_NOTE, encoding="utf-8")
    eng.memory.refresh_catalog = lambda catalog: False
    res = eng.memory.evolve("mem-01handwritten0000000000001", "Jobs go through NATS now.")
    assert res["supersedes"] == "mem-01handwritten0000000000001"


@pytest.fixture
def in_process(vault_path):
    """An in-process lexical server (its threads patchable), stopped after."""
    from hive_brain.daemon.server import Server

    os.environ["HIVE_BRAIN_SEMANTIC"] = "0"
    try:
        remember_ = run("remember", "--type", "preference", "--title", "Editor",
                        "--content", "The team edits in axolotl-vim.")
        with Server(resolve(), log_to_stderr=False, resync=3600.0) as srv:
            assert srv.wait_ready(START_TIMEOUT)
            yield srv, remember_
    finally:
        os.environ.pop("HIVE_BRAIN_SEMANTIC", None)


def _ask(srv, name: str, **args) -> dict:
    _, resp = srv.handle(json.dumps({"op": name, "args": args}).encode())
    assert resp["ok"], resp
    return resp["result"]


def _write(srv, op: str, **args) -> dict:
    return _ask(srv, "write", op=op, args=args, agent=None, lock_timeout=5)


def _hold_index(monkeypatch) -> threading.Event:
    """Every tantivy commit waits until the returned event is set (at most 20 s)."""
    from hive_brain.index import lexical

    gate = threading.Event()
    commit = lexical.LexicalWriter.commit

    def held_commit(self):
        assert gate.wait(20), "the index was never let go"
        commit(self)

    monkeypatch.setattr(lexical.LexicalWriter, "commit", held_commit)
    return gate


def test_a_write_is_answered_once_durable_and_a_read_after_it_waits_for_its_index(in_process, monkeypatch):
    """The index (a tantivy commit, the generation's fsyncs: most of a one-note write) follows the
    answer; a recall sent right after still finds the note. Before, the write waited for its index:
    held here, the write did not answer until the index was let go."""
    srv, _ = in_process
    gate = _hold_index(monkeypatch)
    done: list[dict] = []
    t = threading.Thread(target=lambda: done.append(_write(srv, "remember", inp={
        "type": "fact", "title": "Hosting", "content": "The web app runs on quokkahost."})))
    t.start()
    t.join(10)
    try:
        assert done and done[0]["status"] == "created", "the write waited for its index"
        path = done[0]["path"]
        assert "quokkahost" in (srv.vault.root / path).read_text()
        found: list[dict] = []
        r = threading.Thread(target=lambda: found.append(_ask(srv, "recall", query="quokkahost", scope="full-vault")))
        r.start()
        r.join(0.3)
        assert not found, "a recall answered before the write it follows was indexed"
    finally:
        gate.set()
        t.join(10)
    r.join(10)
    assert [h["path"] for h in found[0]["hits"]] == [path]
    # Its generation is labelled as a write's (memory.layers.redact_paths reads that form back).
    from hive_brain.index.generations import GenerationStore

    gens = GenerationStore(srv.state)
    assert gens.load(gens.current_id()).label == f"write: {path}"


def test_a_read_waits_only_for_the_unindexed_writes_that_could_change_its_hits(in_process, monkeypatch):
    """A recall whose question shares no word with the notes written but not yet indexed (new or old
    versions) is answered at once; one that could find them, or whose candidates do not come from
    their words alone, still waits for their index. Before, every recall after a write waited for its
    tantivy commit (here held: each of them waited until the index was let go)."""
    from hive_brain.daemon import sockets

    monkeypatch.setattr(sockets, "READ_SETTLE_S", 30.0)  # no read gives up waiting while the index is held
    srv, editor = in_process
    gate = _hold_index(monkeypatch)
    asked: dict[str, list[dict]] = {}
    threads = []

    def ask(query: str) -> None:
        asked[query] = []
        t = threading.Thread(target=lambda: asked[query].append(_ask(srv, "recall", query=query, scope="full-vault")))
        t.start()
        threads.append(t)

    try:
        new = _write(srv, "remember", inp={"type": "fact", "title": "Hosting", "content": "The web app runs on quokkahost."})
        _write(srv, "update", memory_id=editor["id"], content="The team edits in narwhal-emacs.")
        ask("Which database stores billing records?")
        threads[0].join(10)
        assert asked["Which database stores billing records?"], "a recall the writes cannot change waited for their index"
        for q in ("quokkahost", "axolotl-vim", "narwhal-emacs", "What did we write today?", "quokkahots"):
            ask(q)  # the new note's word, the old version's, the new version's, a time window, a misspelling
        time.sleep(0.3)
        assert [q for q, r in asked.items() if r] == ["Which database stores billing records?"], \
            "answered before the writes it could see were indexed"
    finally:
        gate.set()
        for t in threads:
            t.join(20)
    assert [h["path"] for h in asked["quokkahost"][0]["hits"]] == [new["path"]]
    assert editor["path"] not in [h["path"] for h in asked["axolotl-vim"][0]["hits"]]
    assert [h["path"] for h in asked["narwhal-emacs"][0]["hits"]] == [editor["path"]]
    assert asked["quokkahots"][0]


def test_a_read_that_does_not_wait_still_starts_the_writes_index(in_process, monkeypatch):
    """The read is answered at once, and the cycle indexing the writes begins then, not after its delay:
    a write that came during that cycle would wait for all of it (cli_latency at 10k: the `remember` after a
    recall and an answer 87 -> 48 ms p50). Held off here by a long delay and debounce, the write stayed
    unindexed after the read."""
    from hive_brain.daemon import indexing

    srv, _ = in_process
    monkeypatch.setattr(indexing, "WRITE_INDEX_DELAY_S", 60.0)
    monkeypatch.setattr(srv.indexing, "debounce", 60.0)
    _write(srv, "remember", inp={"type": "fact", "title": "Hosting", "content": "The web app runs on quokkahost."})
    assert _ask(srv, "recall", query="Which database stores billing records?", scope="full-vault") is not None
    assert _all_indexed(srv.indexing), "the write waited out its delay after the read"


def _all_indexed(loop, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while loop._writes_indexed < loop._writes_acked and time.monotonic() < deadline:
        time.sleep(0.02)
    return loop._writes_indexed == loop._writes_acked


def _write_beside_a_request(srv, monkeypatch, yield_max: float) -> None:
    """A write whose cycle is due in 0.05 s, made while a request is in flight (ended by the caller)."""
    from hive_brain.daemon import indexing

    monkeypatch.setattr(indexing, "WRITE_INDEX_DELAY_S", 0.05)
    monkeypatch.setattr(indexing, "CYCLE_YIELD_MAX_S", yield_max)
    srv.indexing.begin_request()
    _write(srv, "remember", inp={"type": "fact", "title": "Hosting", "content": "The web app runs on quokkahost."})


def test_a_writes_index_waits_for_the_request_being_answered(in_process, monkeypatch):
    """A cycle nobody waits for does not begin beside a request: its Python shared the GIL with the
    request (cli_latency: a recall right after a write). Before, the write was indexed after its
    0.05 s delay here, the request still in flight."""
    srv, _ = in_process
    loop = srv.indexing
    try:
        _write_beside_a_request(srv, monkeypatch, yield_max=30.0)
        time.sleep(1.0)
        assert loop._writes_indexed < loop._writes_acked, "the write's index began beside the request in flight"
    finally:
        loop.end_request()
    assert _all_indexed(loop), "the write was not indexed once the request was answered"


def test_a_writes_index_waits_for_requests_only_so_long(in_process, monkeypatch):
    """A steady stream of requests cannot hold indexing off: past CYCLE_YIELD_MAX_S the cycle begins."""
    srv, _ = in_process
    try:
        _write_beside_a_request(srv, monkeypatch, yield_max=0.3)
        assert _all_indexed(srv.indexing), "a request in flight held the write's index off for good"
    finally:
        srv.indexing.end_request()


@pytest.fixture
def cold_coverage():
    """Coverage's word-set cache emptied before the server (requested first) starts."""
    from hive_brain.search import features

    features._terms_of.cache_clear()


def test_a_lexical_server_reads_coverage_ahead_of_questions(cold_coverage, in_process):
    """Without a second model (semantic off), nothing read ahead: each question analysed its candidates'
    passages itself (at 10k notes ~4 of a lexical recall's 15 ms CPU, cli_latency's 40 questions)."""
    from hive_brain.search import features

    srv, editor = in_process
    loop = srv.indexing
    deadline = time.monotonic() + 20
    while loop.rerank_ahead and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loop.rerank_ahead == 0 and not loop.reranker_on
    text = loop.snap.lexical.note_docs(editor["path"])[0]["text"]
    hits = features._terms_of.cache_info().hits
    features._terms_of(text)
    assert features._terms_of.cache_info().hits == hits + 1, "the note's passage was not read ahead"


def _count_walks(monkeypatch) -> list[int]:
    from hive_brain.store import catalog

    return count_calls(monkeypatch, catalog, "walk_markdown")


def test_reads_and_catch_ups_through_the_server_read_only_what_changed(in_process, monkeypatch, vault_path):
    """get/core/status and the catch-up after an edit re-read the notes the watcher saw change, not
    a stat walk of the whole vault per request (10k notes: ~0.2 s of each); they still see the edit.
    Before, each of these walked."""
    srv, mem = in_process
    walks = _count_walks(monkeypatch)
    assert _ask(srv, "get", memory_id=mem["id"])["id"] == mem["id"]
    assert "axolotl-vim" in _ask(srv, "core", budget=6000)["text"]
    assert _ask(srv, "vault_status")["memories"] >= 1
    assert walks[0] == 0
    note = vault_path / mem["path"]
    note.write_text(note.read_text().replace("axolotl-vim", "narwhal-emacs"), encoding="utf-8")
    deadline = time.monotonic() + 10
    while not _paths(srv.state, "narwhal") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _paths(srv.state, "narwhal") == [mem["path"]]
    assert "narwhal-emacs" in _ask(srv, "core", budget=6000)["text"]
    assert "narwhal-emacs" in _ask(srv, "get", memory_id=mem["id"])["content"]
    assert walks[0] == 0
    # A note saved by hand an instant ago (its event maybe not delivered yet) is still found by id,
    # and `catch_up` (for scripts that just wrote notes) still walks the vault.
    (vault_path / "Memory" / "Distillations" / "Agent Memory" / "Queue broker.md").write_text(HAND_NOTE, encoding="utf-8")
    assert _ask(srv, "get", memory_id="mem-01handwritten0000000000001")["path"].endswith("Queue broker.md")
    _ask(srv, "catch_up", timeout=10)
    assert walks[0] >= 1


def test_status_counts_what_is_not_yet_indexed_without_diffing_the_vault(in_process, monkeypatch, vault_path):
    """`status` through the server counts the notes not yet indexed from what changed since its
    snapshot (the watcher's and its own writes), not by diffing every catalog row with the manifest
    on the request thread (10k notes: ~25 ms a request, and the manifest re-materialised per generation):
    a write, a hand edit and a hand deletion held back from the index are counted, as the full diff counts them."""
    from hive_brain.engine import Engine
    from hive_brain.index import indexer

    srv, _ = in_process
    for name in ("Kite", "Sled"):
        (vault_path / "Ideas" / f"{name}.md").parent.mkdir(parents=True, exist_ok=True)
        (vault_path / "Ideas" / f"{name}.md").write_text(f"# {name}\n\nA {name.lower()} of lemurfabric.\n", encoding="utf-8")
    _ask(srv, "catch_up", timeout=10)
    assert _ask(srv, "vault_status")["staleNotes"] == 0
    diffs = [0]
    diff = indexer.Indexer.diff

    def counted(self, only=None):
        if threading.current_thread().name.startswith("hive-brain-req") or threading.current_thread() is threading.main_thread():
            diffs[0] += 1
        return diff(self, only)

    monkeypatch.setattr(indexer.Indexer, "diff", counted)
    gate = _hold_index(monkeypatch)
    try:
        _write(srv, "remember", inp={"type": "fact", "title": "Hosting", "content": "The web app runs on quokkahost."})
        (vault_path / "Ideas" / "Kite.md").write_text("# Kite\n\nA kite of narwhalsilk.\n", encoding="utf-8")
        (vault_path / "Ideas" / "Sled.md").unlink()
        deadline = time.monotonic() + 10
        while (st := _ask(srv, "vault_status"))["staleNotes"] < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert st["staleNotes"] == 3
        assert diffs[0] == 0, "the request diffed the whole vault"
        _, _, todo, gone = diff(Engine.open().indexer, [])
        assert len(todo) + len(gone) == 3
    finally:
        gate.set()
    deadline = time.monotonic() + 10
    while (st := _ask(srv, "vault_status"))["staleNotes"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert st["staleNotes"] == 0  # (between the cycle's publish and its snapshot a request diffs in full)
