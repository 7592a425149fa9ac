"""The prompt hook with the server up: one ``prompt`` request, answered warm from the first prompt.

Real servers (in-process :class:`~hive_brain.daemon.server.Server` or a detached process), real model
where the test says ``with_model``, real hook processes. No timing is asserted (benchmarks/scale.py
measures the hook); these check what makes it fast: what the hook process loads, what crosses the
socket, and that nothing is left cold for the first prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hive_brain.agents import hooks
from hive_brain.config import resolve
from hive_brain.memory.operations import usage_counts
from hive_brain.rpc import client

from .helpers import hung_server, remember

READY_WITHIN = 90.0


def _wait(pred, timeout: float) -> None:
    t_end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < t_end, "timed out"
        time.sleep(0.1)


@pytest.fixture
def live(vault_path, with_model):
    """A ready in-process server over a vault holding two memories, every passage embedded."""
    from hive_brain.daemon.server import Server

    pkg = remember("Package manager", "Use pnpm for JavaScript projects, never npm.", "preference")
    remember("Hosting", "The web app is deployed on Fly.io in the Amsterdam region.", "decision")
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(READY_WITHIN)
        _wait(lambda: client.call(srv.state, "status", timeout=5)["semantic"]["pendingPassages"] == 0, READY_WITHIN)
        yield srv, pkg


def test_the_server_is_warm_before_it_says_ready(vault_path, with_model):
    """Before the fix the vectors' in-memory copy was loaded by the first search, inside the first
    prompt's request: right after a start that prompt timed out (1.5 s) with nothing injected."""
    from hive_brain.daemon.server import Server
    from hive_brain.engine import Engine

    remember("Package manager", "Use pnpm for JavaScript projects, never npm.", "preference")
    Engine.open().rebuild()  # the vectors exist before the server starts
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(READY_WITHIN)
        snap = srv.indexing.snap
        assert snap.vectors is not None and snap.vectors._mem is not None
        # ... and one whole prompt was answered before ready (its imports and first model runs).
        assert "warm read " in srv.log_path.read_text(encoding="utf-8")  # "ready in ...s (..., warm read ...s)"


def test_the_server_analyses_passages_for_coverage_ahead_of_questions(vault_path, with_model):
    """At 10k notes re-analysing the candidates' passages (coverage's word sets) was a quarter of the
    prompt op: the server's idle read-ahead does it, so a question finds them analysed."""
    from hive_brain.daemon.server import Server
    from hive_brain.search import features

    remember("Package manager", "Use pnpm for JavaScript projects, never npm.", "preference")
    remember("Hosting", "The web app is deployed on Fly.io in the Amsterdam region.", "decision")
    features._terms_of.cache_clear()
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(READY_WITHIN)
        _wait(lambda: "passages read ahead" in srv.log_path.read_text(encoding="utf-8"), READY_WITHIN)
        lex = srv.indexing.snap.lexical
        from hive_brain.search.rerank import warm_order

        texts = [d["text"] for e in warm_order(srv.sockets._catalog()) for d in lex.get_docs(lex.note_passages(e.path)).values()]
        assert len(texts) >= 2
        before = features._terms_of.cache_info()
        for t in texts:
            features._terms_of(t)
        after = features._terms_of.cache_info()
        assert after.misses == before.misses and after.hits == before.hits + len(texts)


def test_a_vector_write_reloads_the_search_copy_on_the_indexing_thread(live):
    srv, _ = live
    vectors = srv.indexing.snap.vectors
    before = vectors._mem[0]
    remember("Editor", "Indent with four spaces; tabs are never used.", "preference")
    client.call(srv.state, "catch_up", timeout=30)
    _wait(lambda: client.call(srv.state, "status", timeout=5)["semantic"]["pendingPassages"] == 0, READY_WITHIN)
    # Reloaded by the server after its write, at the table's new version: no request pays for it.
    _wait(lambda: vectors._mem[0] != before, 10)
    assert vectors._mem[0] == vectors._table(create=False).version


def test_the_prompt_op_answers_the_whole_hook_and_logs_what_it_injected(live):
    srv, pkg = live
    res = client.call(srv.state, "prompt", {"prompt": "which node dependency tool should I use?", "budget": 4000,
                                            "agent": "claude-code"}, timeout=30)
    assert res["mode"] == "hybrid" and not res["abstained"]
    assert res["context"].startswith("[hive-brain: hybrid recall") and "pnpm" in res["context"]
    assert res["context"].rstrip().endswith("</hive-brain-recall>") and res["chars"] == len(res["context"])
    assert res["items"][0] == {"path": pkg["path"], "id": pkg["id"], "kind": "memory"}
    assert "recall" not in res and "hits" not in res  # the hook needs the context, not every hit's details
    assert usage_counts(srv.state).get(pkg["id"], {}).get("retrieved") == 1
    off = client.call(srv.state, "prompt", {"prompt": "how does photosynthesis work in plants?", "budget": 4000},
                      timeout=30)
    assert off["abstained"] and not off["context"] and off["items"] == []
    for bad, word in (({"budget": 4000}, "prompt"), ({"prompt": "x", "budget": "big"}, "budget"),
                      ({"prompt": "x", "budget": 4000, "pool": 3}, "pool")):
        with pytest.raises(Exception, match=word):
            client.call(srv.state, "prompt", bad, timeout=10)


def test_the_prompt_op_reads_the_transcript_for_what_the_prompt_refers_to(live, tmp_path):
    srv, pkg = live
    tp = tmp_path / "t.jsonl"
    lines = [{"type": "user", "message": {"role": "user", "content": "what should I set up first?"}},
             {"type": "assistant", "message": {"role": "assistant", "content": [
                 {"type": "text", "text": "First choose the package manager for the JavaScript project."}]}}]
    tp.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    res = client.call(srv.state, "prompt", {"prompt": "ok do that", "budget": 4000, "transcript_path": str(tp)},
                      timeout=30)
    assert [it["id"] for it in res["items"]] == [pkg["id"]]


def test_the_search_of_prompt_and_reply_is_lexical_and_the_answer_still_hybrid(live, tmp_path, monkeypatch):
    """The search of prompt + the whole reply before it (for what a short prompt refers to) runs
    without the models: its hits must have their title words in that text anyway, and the models over
    a 1,500-character text tripled the hook's time. The models read the prompt with the reply's end
    (``hook_context_chars``) only when nothing else passed the gate: that search, too, doubled the
    hook's time with a transcript. The frame still says what the server is."""
    from hive_brain.search import recall

    srv, pkg = live
    calls: list[tuple[str, bool]] = []
    real = recall.search

    def spy(view, query, **kw):
        calls.append((query, kw.get("semantic", True)))
        return real(view, query, **kw)

    monkeypatch.setattr(recall, "search", spy)
    tp = tmp_path / "t.jsonl"
    reply = "Next I would pick the package manager for the JavaScript project, then set up the CI job."
    lines = [{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": reply}]}}]
    tp.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    res = client.call(srv.state, "prompt", {"prompt": "go ahead with the first one", "budget": 4000,
                                            "transcript_path": str(tp)}, timeout=30)
    assert [it["id"] for it in res["items"]] == [pkg["id"]]
    assert res["mode"] == "hybrid" and "hybrid recall" in res["context"]
    from hive_brain.search.params import PARAMS

    assert [sem for q, sem in calls if reply in q] == [False]  # the referent passed: no search by meaning
    assert [sem for q, sem in calls if reply not in q] == [True]  # the prompt alone: by meaning too
    calls.clear()
    other = "I renamed the variables in the parser and the tests still pass."
    tp.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "text", "text": other}]}}) + "\n", encoding="utf-8")
    client.call(srv.state, "prompt", {"prompt": "go on", "budget": 4000, "transcript_path": str(tp)}, timeout=30)
    assert sorted(sem for q, sem in calls if other in q) == [False, True]  # nothing passed: the reply's end too
    assert all(len(q) <= len("go on") + 1 + PARAMS["hook_context_chars"] for q, sem in calls if sem)


def test_the_hook_process_asks_once_and_loads_no_ranking_code(live):
    srv, pkg = live
    code = textwrap.dedent("""
        import json, sys, time
        from hive_brain.agents import hooks
        s = hooks._settings({}, [])
        pack = hooks.answer_for_hook(s, "which node dependency tool should I use?", budget=4000,
                                     deadline=time.monotonic() + 30)
        loaded = [m for m in ("snowballstemmer", "hive_brain.index.textproc", "hive_brain.search.answer",
                              "hive_brain.memory.conversations", "hive_brain.memory.operations",
                              "hive_brain.search.recall", "numpy", "dataclasses", "inspect") if m in sys.modules]
        print(json.dumps({"mode": pack["mode"], "ctx": pack["context"], "loaded": loaded}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, HIVE_AGENT_ID="claude-code"))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["mode"] == "hybrid" and "pnpm" in got["ctx"]
    assert got["loaded"] == []


def test_an_older_server_without_the_prompt_op_still_answers_hybrid(live, monkeypatch):
    srv, _ = live
    sock = srv.sockets
    real = sock._ops
    monkeypatch.setattr(sock, "_ops", lambda: {k: v for k, v in real().items() if k != "prompt"})
    s = resolve(agent_id="claude-code")
    pack = hooks.answer_for_hook(s, "which node dependency tool should I use?", budget=4000,
                                 deadline=time.monotonic() + 30)
    assert pack["mode"] == "hybrid" and "pnpm" in pack["context"] and not pack.get("serverError")


def _installed_prompt_hook(prompt: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """The prompt hook exactly as `hooks install` writes it, run by a shell as an agent runs it."""
    from hive_brain.agents.settingsfile import hook_command

    cmd = hook_command("prompt", "claude-code", os.environ["HIVE_BRAIN_VAULT"])
    assert " -S " in cmd and cmd.endswith(" hook prompt")
    if extra:  # e.g. -X importtime, placed before the entry's path
        cmd = cmd.replace(" -S ", " -S " + " ".join(extra) + " ", 1)
    payload = json.dumps({"session_id": "t", "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    return subprocess.run(["/bin/sh", "-c", cmd], input=payload, capture_output=True, text=True, timeout=120)


def test_the_installed_hook_runs_without_site_and_answers_from_the_server(live):
    srv, pkg = live
    out = _installed_prompt_hook("which node dependency tool should I use?", "-X", "importtime")
    assert out.returncode == 0, out.stderr
    ctx = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "hybrid recall" in ctx and "pnpm" in ctx
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "hive_brain.agents.quick" in imported  # the importtime listing is really there
    # -S: no site (the venv's .pth files); the fast path (agents/quick.py) loads neither json nor socket
    # (nor re, enum, pathlib behind them), typing, tomllib or threading, nor the full hook path
    assert not imported & {"site", "json", "socket", "re", "enum", "pathlib", "typing", "tomllib", "threading",
                           "dataclasses", "tantivy", "numpy", "hive_brain.agents.hooks", "hive_brain.search.recall"}


def test_the_installed_hook_loads_site_for_the_lexical_answer_when_no_server_runs(vault_path):
    remember("Release steps", "Tag the commit, then run make release and announce it in #eng.", "procedure")
    from hive_brain.engine import Engine

    Engine.from_settings(resolve()).rebuild()
    out = _installed_prompt_hook("what are the release steps after tagging the commit?")
    assert out.returncode == 0, out.stderr
    ctx = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "lexical recall only" in ctx and "make release" in ctx


def test_the_fast_path_answers_as_the_full_path_and_records_its_status(live, capsys):
    from hive_brain.agents import quick

    srv, pkg = live
    payload = json.dumps({"session_id": "s1", "prompt": "which node dependency tool should I use?"})
    os.environ["HIVE_AGENT_ID"] = "claude-code"
    try:
        assert quick.answer(payload, time.monotonic()) == 0
        fast = json.loads(capsys.readouterr().out)
        assert hooks.dispatch("prompt", [], stdin=payload, hard_exit=False) == 0
        full = json.loads(capsys.readouterr().out)
    finally:
        del os.environ["HIVE_AGENT_ID"]
    assert fast == full and "pnpm" in fast["hookSpecificOutput"]["additionalContext"]
    runs = hooks.read_status(resolve().state_dir)["runs"]
    assert [(r["mode"], r["agent"], r["session_id"], r["items"]) for r in runs[-2:]] == [("hybrid", "claude-code", "s1", 1)] * 2
    assert runs[-2]["serverMs"] > 0 and runs[-2]["durationMs"] >= runs[-2]["serverMs"]


def test_the_fast_path_finds_the_state_dir_the_full_path_finds(vault_path):
    from hive_brain.agents import quick
    from hive_brain.store.vault import open_vault

    v = open_vault(resolve())
    assert quick._vault_state(str(vault_path), os.environ["HIVE_BRAIN_STATE_DIR"]) == str(v.state)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=12))
@settings(max_examples=200, deadline=None)
def test_the_fast_paths_json_is_json(obj):
    from hive_brain.agents import quick

    text = quick.dumps(obj)
    assert text == json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    assert quick.loads(text) == obj and quick.loads(" " + json.dumps(obj, indent=1) + "\n") == obj


def test_the_fast_paths_json_refuses_what_json_refuses():
    from hive_brain.agents import quick

    for bad in ("", "{", '{"a": 1} x', "[1,]", "{'a': 1}", "nul"):
        with pytest.raises(ValueError):
            quick.loads(bad)
    assert quick.loads("[NaN]")[0] != quick.loads("[NaN]")[0]  # as json reads it


def test_a_server_that_hangs_costs_the_prompt_one_wait_not_two(vault_path, tmp_path):
    """The fast path gives up on a silent server at the deadline less the lexical reserve; the full
    path is told and answers in-process without asking the server again."""
    from hive_brain.engine import Engine
    from hive_brain.store.vault import open_vault

    remember("Release steps", "Tag the commit, then run make release and announce it in #eng.", "procedure")
    Engine.from_settings(resolve()).rebuild()
    state = open_vault(resolve()).state
    # One deadline for the whole hook: of the default 1.5 s the lexical answer has 0.5 s after the
    # server's share, which a loaded test machine can spend on the interpreter alone; 3 s keeps 1 s.
    os.environ["HIVE_BRAIN_HOOK_DEADLINE"] = "3"
    try:
        with hung_server(state) as accepted:
            out = _installed_prompt_hook("what are the release steps after tagging the commit?")
    finally:
        del os.environ["HIVE_BRAIN_HOOK_DEADLINE"]
    assert out.returncode == 0, out.stderr
    assert "make release" in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    last = hooks.read_status(resolve().state_dir)["last"]["prompt"]
    assert last["mode"] == "lexical" and "no answer in time" in last["serverError"]
    assert len(accepted) == 1


def test_a_prompt_while_the_server_is_still_embedding_is_answered_hybrid(vault_path, with_model):
    """Issue 26: "ready" must mean hybrid-ready for a prompt. Right after ready the server still embeds
    the vault's passages and reads them ahead for the reranker; a prompt then must get the hybrid answer
    (with the memory it asks about) in the hook's share of its deadline, and embedding must go on
    between prompts (it made no progress while prompts ran)."""
    from hive_brain.agents.quick import local_reserve
    from hive_brain.config import default
    from hive_brain.daemon.server import Server

    remember("Package manager", "Use pnpm for JavaScript projects, never npm.", "preference")
    filler = vault_path / "Projects" / "filler"
    filler.mkdir(parents=True)
    for i in range(150):
        (filler / f"note-{i:03d}.md").write_text(
            f"# Filler {i}\n\nMeeting {i} went over the quarterly roadmap for team {i % 7} and its budget.\n\n"
            f"## Follow-up {i}\n\nAction items: review ticket {i * 13}, update the wiki page on service {i % 11}.\n",
            encoding="utf-8")
    share = float(default("hook_deadline")) - local_reserve(float(default("hook_deadline")))
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(READY_WITHIN)
        first = client.call(srv.state, "status", timeout=10)["semantic"]
        assert first["pendingPassages"] > 0 or first["rerankAhead"] > 0, "nothing left to embed: the test says nothing"
        # Prompts one after another (a user typing fast) until every passage is embedded: each answered
        # hybrid, and the embedding finishes between them (the vector table is written in flushes, so
        # "pending" drops in steps).
        modes: list[str] = []
        t_end = time.monotonic() + READY_WITHIN
        while client.call(srv.state, "status", timeout=10)["semantic"]["pendingPassages"]:
            assert time.monotonic() < t_end, f"embedding made no progress while prompts ran ({len(modes)} prompts)"
            res = client.call(srv.state, "prompt", {"prompt": "which package manager should I use for node?",
                                                    "budget": 4000}, timeout=max(share, 3.0))
            modes.append(res["mode"])
            assert "pnpm" in res["context"], res
            time.sleep(0.2)
        assert modes and set(modes) == {"hybrid"}, modes


def test_reading_ahead_for_the_reranker_stops_for_a_request_in_flight(vault_path, with_model):
    """A read-ahead step ran 16 notes (~40 passages, up to a second of model time on a loaded machine)
    whatever came in meanwhile: a prompt waited for it past its share of the deadline. It now goes a
    few notes at a time and stops for a request."""
    from hive_brain.daemon.server import Server
    from hive_brain.engine import Engine

    filler = vault_path / "Projects" / "filler"
    filler.mkdir(parents=True)
    for i in range(40):
        (filler / f"note-{i:03d}.md").write_text(f"# Filler {i}\n\nMeeting {i} went over the roadmap of team {i}.\n",
                                                 encoding="utf-8")
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(READY_WITHIN)
        loop = srv.indexing
        loop.begin_request()
        try:
            time.sleep(1.0)  # a step the indexing thread had begun ends (and no new one starts)
            before = loop.rerank_ahead
            assert before > 0, "nothing left to read ahead: the test says nothing"
            loop._rerank_warm(Engine.open().indexer)
            assert loop.rerank_ahead == before
        finally:
            loop.end_request()
