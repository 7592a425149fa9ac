"""Hostile input (issue 16): no traceback, nothing lost, a clear error, whatever a caller or a vault holds.

Property-based tests (hypothesis, bounded so the file stays fast) and fixed cases: NUL and other
control characters, lone surrogates and invalid UTF-8 through every door (the memory API, argv,
batch JSON, the server's socket), hand-edited notes with broken, nested or object-constructing YAML,
huge, binary and one-line-megabyte files, symlinks out of the vault, path traversal in every
caller-supplied name, and queries made of query syntax. ``benchmarks/hostile_input.py`` counts the
same doors over thousands of seeded inputs (the numbers in docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_brain.config import resolve
from hive_brain.engine import Engine
from hive_brain.errors import HiveBrainError, InvalidText, UsageError, VaultError
from hive_brain.memory.model import MemoryInput

from .helpers import doctor, remember, run

QUERY_SYNTAX = list('+-&|!(){}[]^"~*?:\\/\'`<>=@#$%,.;') + ["AND", "OR", "NOT", "TO", "title:", "*:*", "[a TO b]",
                                                             "{1 TO 2}", '"a b"~2', "x^3", "IN [a b]", "&&", "||"]
NASTY = ["\x00", "\x01", "\x07", "\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\x9b", "\ud800", "\udbff", "\udc80", "\udfff",
         "\ufeff", "\ufffe", "\uffff", "\u2028", "\u202e", "\t", "\n", "\r", "---", "!!python/object", "../", "é", "😀"]


def texts(pieces: list[str], max_size: int) -> st.SearchStrategy[str]:
    """Strings made of any characters and the given (multi-character) pieces."""
    return st.lists(st.one_of(st.characters(), st.sampled_from(pieces)), max_size=max_size).map("".join)


HOSTILE = texts(NASTY + QUERY_SYNTAX, 30)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])
PYTHON = [sys.executable, "-m", "hive_brain"]


def _engine() -> Engine:
    return Engine.open()


def _crashless(fn: Any) -> Any:
    """Run ``fn``; a HiveBrainError (a clear refusal) is fine and returned, anything else fails."""
    try:
        return fn()
    except HiveBrainError as e:
        return e


# -- the defects: each of these failed before the fix ----------------------------------------------

def test_nul_in_content_is_refused_not_written_as_a_binary_note(vault_path):
    res = run("remember", "--type", "fact", "--title", "Log", "--content", "before\x00after", ok=False)
    assert res["_exit"] == 2 and res["error"] == "InvalidText", res
    assert "U+0000" in res["message"] and "nothing was stored" in res["message"]
    assert not [p for p in (vault_path / "Memory").rglob("*.md") if p.name.startswith("log")]


@pytest.mark.parametrize("field", ["title", "content", "tags", "project", "memory_key"])
@pytest.mark.parametrize("bad", ["\ud800", "\udcff", "\x00", "\x1b[2J", "\x7f", "\x9b"])
def test_control_characters_and_lone_surrogates_are_refused_in_every_field(vault_path, field, bad):
    kw: dict[str, Any] = {"type": "fact", "title": "Field test", "content": "Plain content."}
    kw[field] = [f"a{bad}b"] if field == "tags" else f"{kw.get(field, '')}a{bad}b"
    with pytest.raises(InvalidText) as e:
        _engine().memory.remember(MemoryInput(**kw))
    assert f"U+{ord(bad[0]):04X}" in e.value.message
    assert field.replace("_", " ") in e.value.message or (field == "tags" and "tags" in e.value.message)


def test_tabs_newlines_and_ordinary_unicode_are_text(vault_path):
    res = remember("Unicode 😀 עברית", "Line one\r\n\tindented\nline three – é \u2028 \ufeff.", "fact")
    got = run("get", "--memory-id", res["id"])
    assert "\tindented" in got["content"] and "😀" in got["meta"]["title"]


def test_update_evolve_and_lookups_refuse_the_same_characters(vault_path):
    res = remember("Package manager", "Use pnpm.")
    for args in (["update", "--memory-id", res["id"], "--content", "x\x00y"],
                 ["update", "--memory-id", res["id"], "--tags", "ok,\x1bbad"],
                 ["update", "--memory-id", res["id"], "--title", "t\ud800"],
                 ["evolve", "--memory-id", res["id"], "--content", "bun\x00"],
                 ["get", "--memory-id", res["id"] + "\udcff"],
                 ["delete", "--memory-id", "\x00", "--confirm"]):
        out = run(*args, ok=False)
        assert out["_exit"] == 2 and out["error"] == "InvalidText", (args, out)
    assert run("get", "--memory-id", res["id"])["content"] == "Use pnpm."


def test_invalid_utf8_in_argv_is_a_clear_error_not_a_traceback(vault_path):
    env = {**os.environ, "HIVE_BRAIN_VAULT": str(vault_path)}
    for argv in ([b"remember", b"--type", b"fact", b"--title", b"bad \xff\xfe", b"--content", b"x"],
                 [b"remember", b"--type", b"fact", b"--title", b"ok", b"--content", b"\xed\xa0\x80 surrogate"],
                 [b"get", b"--memory-id", b"mem-\xc3"],
                 [b"recall", b"deploy \xff", b"--lexical"],
                 [b"recall", b"deploy", b"--tags", b"\xff", b"--lexical"]):
        for extra in ([], [b"--json"]):
            p = subprocess.run([*map(os.fsencode, PYTHON), *argv, *extra], capture_output=True, env=env, timeout=120)
            err = p.stderr.decode("utf-8", "replace")
            assert "Traceback" not in err, (argv, err)
            assert p.returncode in (0, 2), (argv, p.returncode, err, p.stdout)
            if argv[0] != b"recall" or b"--tags" in argv:
                assert p.returncode == 2
                assert b"InvalidText" in p.stdout if extra else "invalid UTF-8" in err


def test_batch_json_with_lone_surrogates_or_bad_bytes_is_refused_per_record(vault_path, tmp_path):
    f = tmp_path / "batch.json"
    f.write_text(json.dumps([{"type": "fact", "title": "Good", "content": "Fine."},
                             {"type": "fact", "title": "Bad", "content": "x\ud800y"}]), encoding="utf-8")
    res = run("batch", "--file", str(f), ok=False)
    assert res["_exit"] == 1 and res["records"][1]["error"] == "InvalidText", res
    assert res["records"][0]["status"] == "ok" and "nothing was written" in res["message"]
    f.write_bytes(b'[{"type": "fact", "title": "\xff", "content": "x"}]')
    res = run("batch", "--file", str(f), ok=False)
    assert res["_exit"] == 2 and "cannot read" in res["message"]
    f.write_text('[{"type": "fact", "title": "T", "content": "c", "project": 5}]', encoding="utf-8")
    assert run("batch", "--file", str(f), ok=False)["records"][0]["error"] == "UsageError"


def test_queries_with_surrogates_nul_or_syntax_are_answered_and_bad_filters_refused(vault_path):
    remember("Deploy tool", "We deploy with pnpm and turbo.", "fact")
    eng = _engine()
    for q in ["pnpm \ud800", "\x00pnpm", "pnpm\udcff\x1b[31m", *(f"pnpm{c}" for c in QUERY_SYNTAX if len(c) == 1)]:
        res = eng.recall(q, semantic=False)
        assert [h["title"] for h in res["hits"]] == ["Deploy tool"], q
        json.dumps(res, ensure_ascii=False).encode("utf-8")  # nothing un-encodable comes back
    for q in [*QUERY_SYNTAX, " ".join(QUERY_SYNTAX), "".join(QUERY_SYNTAX), "(" * 500, '"' * 501]:
        assert isinstance(eng.recall(q, semantic=False)["hits"], list)  # answered (possibly abstaining)
    for opts in ({"tags": ["\ud800"]}, {"project": "\x00"}, {"types": ["fact\udcff"]}, {"tags": "tooling"},
                 {"limit": "5"}, {"drop_ratio": "x"}, {"scope": "everything"}, {"pool": -1}):
        with pytest.raises(UsageError):
            eng.recall("pnpm", semantic=False, **opts)


# -- the server's socket ---------------------------------------------------------------------------

MALFORMED = [
    b"", b"{", b'{"op": "recall", "args": {"query": "pnpm"', b"[]", b"null", b"42", b'"ping"', b"\xff\xfe\x00",
    b'{"op": 1}', b'{"op": ["ping"]}', b'{"op": null}', b'{"op": "\\ud800"}', b'{"op": "recall", "args": []}',
    b'{"op": "recall", "args": {"query": 5}}', b'{"op": "recall", "args": {"query": "x", "\\udcff": 1}}',
    b'{"op": "recall", "args": {"query": "pnpm", "tags": true}}', b'{"op": "recall", "args": {"query": "x", "limit": "5"}}',
    b'{"op": "answer", "args": {"query": "x", "budget": "big"}}', b'{"op": "answer", "args": {"query": "x", "drop_ratio": "?"}}',
    b'{"op": "recall", "args": {"query": "x", "agent": 7}}', b'{"op": "recall", "args": {"query": "x", "now": 5}}',
    b'{"op": "recall", "args": {"query": "x", "project": {"a": 1}}}', b'{"op": "catch_up", "args": {"timeout": "soon"}}',
    b'{"op": "recall", "args": {"query": "x", "mode": 3}}', b'{"op": "recall", "args": {"query": "x", "pool": 1e999}}',
]


def _write(op: str, **args: Any) -> bytes:
    return json.dumps({"op": "write", "args": {"op": op, "args": args}}).encode()


BAD_WRITES = [
    _write("update", memory_id=5, tags=["x"]), _write("update", memory_id="m", tags="x,y"),
    _write("update", memory_id="m", confidence="high"), _write("update", memory_id=["m"], title="t"),
    _write("update", memory_id="m", content=7), _write("update", memory_id="m", status=1),
    _write("evolve", memory_id="m", content={"a": 1}), _write("evolve", memory_id="m", content="x", title=3),
    _write("delete", memory_id="m", confirm="yes"), _write("delete", memory_id=None, confirm=True, force="no"),
    _write("remember", inp="text"), _write("remember", inp=["x"]), _write("remember", inp={"type": 1}),
    _write("remember", inp={"type": "fact", "title": "t", "content": "c", "tags": {"a": 1}}),
    _write("remember", inp={"type": "fact", "title": "t", "content": "c", "confidence": "x"}),
    _write("remember", inp={"type": "fact", "title": "t\u0000", "content": "c"}),
    _write("batch", records="x"), _write("batch", records=[1, "x", None]), _write("nothing"), _write("__init__"),
    _write("update", memory_id="m", tags=[1, None]), _write("update", memory_id="\ud800", tags=["a"]),
    json.dumps({"op": "write", "args": {"op": "update", "args": [1]}}).encode(),
    json.dumps({"op": "write", "args": "x"}).encode(),
]


@pytest.fixture
def in_process_server(vault_path):
    from hive_brain.daemon.server import Server

    remember("Deploy tool", "We deploy with pnpm and turbo.", "fact")
    with Server(resolve(), log_to_stderr=False) as srv:
        assert srv.wait_ready(60)
        yield srv


def _ok_or_structured(resp: dict) -> None:
    if not resp.get("ok"):
        err = resp["error"]
        assert err["type"] != "InternalError", err
        assert isinstance(err["message"], str) and err["message"]


def test_malformed_socket_requests_get_structured_errors(in_process_server):
    srv = in_process_server
    for line in MALFORMED:
        _op, resp = srv.handle(line)
        assert resp["ok"] is False, line
        _ok_or_structured(resp)
    for line in BAD_WRITES:
        _op, resp = srv.handle(line)
        assert resp["ok"] is False, (line, resp)
        _ok_or_structured(resp)
    assert srv.handle(b'{"op": "recall", "args": {"query": "pnpm"}}')[1]["result"]["hits"]
    assert srv.handle(b'{"op": "recall", "args": {"query": "pnpm \\ud800\\u0000"}}')[1]["result"]["hits"]


def test_socket_survives_huge_lines_partial_json_and_bad_utf8_on_a_real_connection(in_process_server):
    from hive_brain.rpc import client
    from hive_brain.rpc.client import MAX_REQUEST

    path = str(client.socket_path(in_process_server.state))

    def exchange(payload: bytes, *, shut: bool = False) -> list[dict]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(20)
            s.connect(path)
            s.sendall(payload)
            if shut:
                s.shutdown(socket.SHUT_WR)
            f = s.makefile("rb")
            return [json.loads(line) for line in f]

    huge = b'{"op": "recall", "args": {"query": "' + b"pnpm " * (MAX_REQUEST // 5 + 10) + b'"}}\n'
    resp = exchange(huge + b'{"op": "ping"}\n')
    assert len(resp) == 1 and resp[0]["error"]["type"] == "UsageError" and "connection is closed" in resp[0]["error"]["message"]
    resp = exchange(b'{"op": "recall", "args": {"query": "pn', shut=True)
    assert resp[0]["error"]["type"] == "UsageError"
    resp = exchange(b'\xff\xfe\n{"op": "recall", "args": {"query": "x", "\\udcff": 1}}\n'
                    b'{"op": "recall", "args": {"query": "pnpm \\ud800"}}\n', shut=True)
    assert [r["ok"] for r in resp] == [False, False, True]
    assert "\\udcff" in json.dumps(resp[1])  # echoed as an escape, not a connection dropped unanswered
    with pytest.raises(client.ServerUnavailable) as e:  # a caller with more works in-process
        client.call(in_process_server.state, "recall", {"query": "x" * (MAX_REQUEST + 1)}, timeout=5)
    assert not e.value.sent
    assert client.call(in_process_server.state, "ping", timeout=5)["ready"] is True


def test_fuzzed_socket_lines_never_internal_error(in_process_server):
    srv = in_process_server
    values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), HOSTILE,
                       st.lists(HOSTILE, max_size=3), st.dictionaries(HOSTILE, HOSTILE, max_size=2))
    keys = st.sampled_from(["query", "agent", "tags", "types", "project", "limit", "as_of", "detail", "mode", "scope",
                            "budget", "now", "semantic", "drop_ratio", "pool", "abstain", "include_operational", "x"])
    requests = st.fixed_dictionaries({"op": st.sampled_from(["recall", "answer", "catch_up", "ping", "status"]),
                                      "args": st.dictionaries(keys, values, max_size=4)})
    lines = st.one_of(st.binary(max_size=200),
                      requests.map(lambda r: json.dumps(r).encode("utf-8")),
                      requests.map(lambda r: json.dumps(r).encode("utf-8")).flatmap(
                          lambda b: st.integers(0, len(b)).map(lambda n: b[:n])))

    @settings(max_examples=150, deadline=None)
    @given(lines)
    def prop(line: bytes) -> None:
        _op, resp = srv.handle(line)
        _ok_or_structured(resp)

    prop()
    assert srv.handle(b'{"op": "ping"}')[1]["ok"] is True


# -- property-based: the memory API and recall -----------------------------------------------------

@FAST
@given(title=HOSTILE, content=HOSTILE, tags=st.lists(HOSTILE, max_size=3), project=st.none() | HOSTILE)
def test_remember_anything_is_stored_readable_or_refused(vault_path, title, content, tags, project):
    eng = _engine()
    inp = MemoryInput(type="fact", title=f"p {title}", content=f"c {content}", tags=tags, project=project)
    res = _crashless(lambda: eng.memory.remember(inp))
    if isinstance(res, HiveBrainError):
        return
    got = eng.memory.get(res["id"])  # what was accepted can be read, found and deleted again
    assert got["meta"]["title"] == " ".join(f"p {title}".split())
    assert eng.memory.delete(res["id"], confirm=True)["status"] == "deleted"


@FAST
@given(query=texts(NASTY + QUERY_SYNTAX, 40))
def test_recall_answers_any_query(vault_path, query):
    eng = _engine()
    res = eng.recall(query, semantic=False)
    assert isinstance(res["hits"], list)
    json.dumps(res, ensure_ascii=False).encode("utf-8")


# -- hand-edited vault content ---------------------------------------------------------------------

def _doctor() -> dict:
    return doctor()


def _problems() -> dict[str, str]:
    return {p["path"]: p["problem"] for p in _doctor()["problems"]}


def _write(vault: Path, rel: str, data: bytes | str) -> Path:
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return p


@FAST
@given(front=texts([":", "- ", "\n", "  ", "[", "]", "{", "}", "&a", "*a", "!!str", "!!python/object:os.system", "%",
                    "'", '"', "#", "---", "...", "? ", "|", ">", "\t", "\x00", "\ufeff", "title: ", "tags: "], 60))
def test_fuzzed_frontmatter_is_reported_or_indexed_never_a_crash(vault_path, front):
    text = f"---\n{front}\n---\n# Fuzzed\n\nzebracorn body text.\n"
    p = _write(vault_path, "Ideas/Fuzzed.md", text)
    eng = _engine()
    eng.doctor()
    assert isinstance(eng.recall("zebracorn", semantic=False)["hits"], list)
    assert p.read_bytes() == text.encode("utf-8", "surrogatepass"), "a hand-edited note is never rewritten"


def test_broken_nested_and_object_constructing_yaml_is_reported_never_run(vault_path, tmp_path):
    marker = tmp_path / "pwned"
    cases = {
        "Ideas/Broken.md": "---\ntitle: [unclosed\n---\nbody\n",
        "Ideas/Nested.md": "---\nx: " + "[" * 5000 + "]" * 5000 + "\n---\nbody\n",
        "Ideas/Nested2.md": "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(3000)) + "---\nbody\n",
        "Ideas/Object.md": f"---\nx: !!python/object/apply:os.system ['touch {marker}']\n---\nbody\n",
        "Ideas/Object2.md": "---\nx: !!python/object/new:os.system ['id']\n---\nbody\n",
        "Ideas/Aliases.md": "---\na: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\n---\nbody\n",
        "Ideas/Unclosed.md": "---\ntitle: never closed\n\nbody\n",
        "Ideas/List.md": "---\n- a\n- b\n---\nbody\n",
    }
    for rel, text in cases.items():
        _write(vault_path, rel, text)
    problems = _problems()
    assert not marker.exists(), "a YAML tag ran code"
    for rel in ("Ideas/Broken.md", "Ideas/Object.md", "Ideas/Object2.md", "Ideas/List.md"):
        assert rel in problems, (rel, problems)
    assert run("recall", "body", "--lexical")["hits"] is not None
    for rel, text in cases.items():
        assert (vault_path / rel).read_text(encoding="utf-8") == text, "never rewritten"


def test_huge_binary_invalid_utf8_and_one_megabyte_line_files(vault_path):
    _write(vault_path, "Ideas/Huge.md", "# Huge\n\n" + ("gigantoword filler text. " * 240_000))  # 6 MB
    _write(vault_path, "Ideas/Big.md", "# Big\n\nbigword\n\n" + ("Some filler text here.\n" * 130_000))  # 3 MB
    _write(vault_path, "Ideas/Binary.md", bytes(range(256)) * 64)
    _write(vault_path, "Ideas/Latin1.md", "# Caf\xe9\n\nlatinword here\n".encode("latin-1"))
    _write(vault_path, "Ideas/Line.md", "# Line\n\n" + "onelineword " + "y" * 1_048_576 + "\n")
    problems = _problems()
    assert "binary" in problems["Ideas/Binary.md"]
    assert "Ideas/Latin1.md" not in problems  # read with a CP-1252 fallback (test_legacy_encodings)
    assert "Ideas/Huge.md" in problems  # over max_note_bytes: reported, not indexed half
    assert "Ideas/Big.md" not in problems
    assert [h["path"] for h in run("recall", "bigword", "--lexical")["hits"]] == ["Ideas/Big.md"]
    res = run("recall", "onelineword", "--lexical")
    assert [h["path"] for h in res["hits"]] == ["Ideas/Line.md"]
    remember("Still writable", "The vault takes writes next to all of this.", "fact")


def test_symlinks_out_of_the_vault_are_not_indexed_or_written_through(vault_path, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nexfiltrateword lives outside\n", encoding="utf-8")
    (vault_path / "Ideas").mkdir(exist_ok=True)
    os.symlink(outside / "secret.md", vault_path / "Ideas" / "Leak.md")
    os.symlink(outside, vault_path / "Ideas" / "LeakDir")
    assert run("recall", "exfiltrateword", "--lexical", "--scope", "full-vault")["hits"] == []
    eng = _engine()
    before = sorted(p.name for p in outside.iterdir())
    for rel in ("Ideas/LeakDir/new.md", "Ideas/Leak.md"):
        with pytest.raises(VaultError), eng.memory.transaction("test") as tx:
            tx.write(rel, "# x\n\noverwritten\n")
    assert sorted(p.name for p in outside.iterdir()) == before
    assert "exfiltrateword" in (outside / "secret.md").read_text(encoding="utf-8")


def _outside_listing(tmp_path: Path, vault: Path) -> list[str]:
    state = tmp_path / "state"
    return sorted(str(p) for p in tmp_path.rglob("*")
                  if vault not in p.parents and p != vault and state not in p.parents and p != state
                  and "home" not in p.relative_to(tmp_path).parts[:1])


@pytest.mark.parametrize("name", ["../../../escaped", "../Memory/x", "/etc/passwd", "..", "a/../../b", "~/x",
                                  "C:\\Windows\\x", "%2e%2e%2fx", ".hive-brain/staging/x", "con", "nul"])
def test_path_traversal_in_every_caller_supplied_name_stays_inside(vault_path, tmp_path, name):
    before = _outside_listing(tmp_path, vault_path)
    outs = [
        run("remember", "--type", "fact", "--title", name, "--content", f"title {name}", ok=False),
        run("remember", "--type", "fact", "--title", "p " + name, "--content", f"project {name}", "--project", name, ok=False),
        run("remember", "--type", "fact", "--title", "k " + name, "--content", f"key {name}", "--memory-key", name, ok=False),
        run("--agent", "bot", "remember", "--type", "fact", "--title", "t " + name, "--content", f"task {name}",
            "--memory-scope", "task", "--task", name, ok=False),
        run("--agent", name, "remember", "--type", "fact", "--title", "a " + name, "--content", f"agent {name}", ok=False),
        run("remember", "--type", name, "--title", "y " + name, "--content", f"type {name}", ok=False),
        run("get", "--memory-id", name, ok=False),
    ]
    for out in outs:
        assert out["_exit"] in (0, 1, 2), out
        if out["_exit"] == 0:
            assert not out["path"].startswith(("/", "..")) and "/../" not in out["path"], out
            assert (vault_path / out["path"]).resolve().is_relative_to(vault_path.resolve())
            assert not out["path"].startswith(".hive-brain/")
    with pytest.raises(VaultError), _engine().memory.transaction("test") as tx:
        tx.write(name if name.startswith(("/", "..")) else "../" + name, "# x\n")
    assert _outside_listing(tmp_path, vault_path) == before


def test_batch_json_with_traversal_names_stays_inside(vault_path, tmp_path):
    recs = [{"type": "fact", "title": "../../../b1", "content": "b1", "project": "../../p", "memory_key": "../../k"},
            {"type": "fact", "title": "/etc/b2", "content": "b2", "task": "../../../t"}]
    f = tmp_path / "b.json"
    f.write_text(json.dumps(recs), encoding="utf-8")
    before = _outside_listing(tmp_path, vault_path)
    res = run("batch", "--file", str(f), ok=False)
    for r in res.get("records", []):
        if r["status"] == "ok":
            assert (vault_path / r["path"]).resolve().is_relative_to(vault_path.resolve())
    assert _outside_listing(tmp_path, vault_path) == before


def test_captured_conversation_with_nul_and_surrogates_is_a_readable_note(vault_path, tmp_path):
    from hive_brain.memory.conversations import capture
    from tests.test_hooks import assistant, user, write_transcript

    t = write_transcript(tmp_path / "s.jsonl", [user("Why did \x00 the build \ud800 break?\x1b[31m"),
                                                assistant("A NUL\x00 byte and \udcff in the log.")])
    res = capture(_engine(), t, agent="claude-code", session_id="nul-session")
    assert res["status"] == "captured", res
    assert vault_path.joinpath(res["path"]).read_bytes().find(b"\x00") == -1
    assert _problems() == {}
    hits = run("recall", "build break log", "--lexical", "--scope", "full-vault")["hits"]
    assert res["path"] in [h["path"] for h in hits]


@pytest.mark.parametrize("payload", [
    b'{"prompt": "deploy \\ud800 \\u0000 pnpm", "session_id": "\\udcff"}',
    b'{"prompt": "x", "transcript_path": "/etc/passwd\\u0000", "session_id": "\\u0000"}',
    b'{"prompt": "x", "transcript_path": "../../\\udcff", "cwd": "\\ud800"}',
    b'\xff\xfe{"prompt"', b'{"prompt": 5}', b"[1]", b'{"prompt": {"a": ["\\ud800"]}}',
])
@pytest.mark.parametrize("event", ["prompt", "stop"])
def test_hook_input_with_nul_surrogates_or_garbage_never_breaks_the_agent(vault_path, payload, event):
    p = subprocess.run([*PYTHON, "hook", event], input=payload, capture_output=True, timeout=60,
                       env={**os.environ, "HIVE_BRAIN_VAULT": str(vault_path)})
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode("utf-8", "replace")
    if p.stdout.strip():
        json.loads(p.stdout)


def test_operational_events_follow_the_same_text_rule(vault_path):
    for args in (["--title", "Deploy \ud800", "--content", "ok"], ["--title", "Deploy", "--content", "log\x00tail"],
                 ["--title", "Deploy", "--content", "ok", "--task-id", "t\udcff"]):
        full = ["record-operation", "--operation-key", "deploy.web", "--outcome", "success", *args]
        if "--task-id" not in args:
            full += ["--task-id", "t1"]
        out = run(*full, ok=False)
        assert out["_exit"] == 2 and out["error"] == "InvalidText", out
    res = run("record-usage", "--memory-ids", "mem-01abc", "--kind", "retrieved", "--query", "why \ud800 \x00 fail")
    assert res["status"] == "recorded"
