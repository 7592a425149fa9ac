"""Secrets never leave through a read: notes written by hand with secrets in them, a real index (tantivy,
LanceDB with the real model), and every read path (recall, answer, get, the prompt hook, MCP) and every
file in the state dir checked for the values, byte by byte. And every write field refuses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hive_brain.cli.app import main
from hive_brain.store.vault import MEMORY_DIR
from tests.helpers import doctor, remember, run

# (kind, the value that must never leave, the note text around it). Each note is about its own
# made-up service, so a question about that service finds that note.
SECRETS: list[tuple[str, str, str]] = [
    ("aws-access", "AKIAQWERTYUIOPASDFGH", "Quokka uploads use the key {v} for the bucket."),
    ("aws-secret", "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", "Quokka uploads sign with the secret {v} too."),
    ("gcp-api", "AIzaSyQWERTYUIOPasdfghjklZXCVBNM1234567", "Marmot maps call Google with {v} in the query."),
    ("gcp-oauth", "ya29.a0MarmotOAuthTokenAbc123XyzQwe", "Marmot batch jobs hold the token {v} for a day."),
    ("azure", "Mx9Lq2Wv8Zr4Ty6Up1Os3Nm5Kb7Jc0Hd2Gf4Ea6Wq8Er0Ty2Ui4Op6As8Df0Gh2Jk4Lz6Xc8Vb0Nm1Qw3Er5Ty7Ui9Oo==",
     "Narwhal blobs: DefaultEndpointsProtocol=https;AccountName=narwhal;AccountKey={v};EndpointSuffix=core.windows.net"),
    ("github", "ghp_N4rwh4lGitHubT0kenAbCdEfGhIjKlMnOp12", "The ocelot release bot pushes with {v} on tags."),
    ("github-pat", "github_pat_11OCELOT00aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdefghijkl",
     "Ocelot nightly uses {v} as its fine-grained token."),
    ("gitlab", "glpat-Pangolin9Runner8Token7x", "The pangolin runner registers with {v} on boot."),
    ("slack-token", "xoxb-112233445566-778899001122-PangolinBotTokenXyz", "Pangolin alerts post as the bot {v} in #ops."),
    ("slack-webhook", "https://hooks.slack.com/services/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3",
     "Tapir deploy notices go to {v} after each release."),
    ("stripe", "sk_live_51TapirStripeLiveKeyAbCdEf", "Tapir billing charges cards with {v} in production."),
    ("openai", "sk-proj-WombatOpenAIKeyAbCdEfGhIjKlMn0123", "Wombat summaries call the model with {v} as the key."),
    ("anthropic", "sk-ant-api03-WombatAnthropicKeyAbCdEfGhIj-0123", "Wombat review bot uses {v} for Claude."),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ5YWsiLCJyb2xlIjoiYWRtaW4ifQ.YakJwtSignatureAbCdEfGhIjKlMn0123",
     "Yak admin API accepts the session {v} until Friday."),
    ("pem", "MIIEowIBAAKCAQEAyakPemBodyLineQwErTyUiOpAsDfGhJkLzXcVbNm0123456789",
     "Yak deploy key:\n\n-----BEGIN RSA PRIVATE KEY-----\n{v}\nAbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/AbCdEfGhIjKlMnOpQrStUv\n"
     "-----END RSA PRIVATE KEY-----\n"),
    ("pem-body", "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
     "Zebu host key, pasted without its first line:\n\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n{v}\n"
     "-----END OPENSSH PRIVATE KEY-----\n"),
    ("url-password", "Zebu-Pg-pa55/word", "Zebu reports read postgres://zebu:{v}@db.zebu.internal:5432/zebu daily."),
    ("redis", "Rz9Coati7Cache", "Coati sessions live in redis://:{v}@cache.coati:6379/0 for a week."),
    ("db-password", "Coati-Db-8vN3q", "Coati backend settings:\n\n```\nDB_PASSWORD={v}\n```\n"),
    ("export-token", "ghs_CoatiExportTok3nAbCdEfGhIjKlMnOpQrSt", "Coati CI step: export GITHUB_TOKEN={v} before push."),
    ("prose-password", "hunter2-Xy9!kLm", "The prod db password for the dingo cluster is {v} (rotate soon)."),
    ("zero-width", "AKIA\u200bDINGOZEROWIDTH12", "Dingo archive key {v} is read-only."),
]


def _needles(value: str) -> list[bytes]:
    """What must not appear: the value, its lowercase form (tantivy lowercases terms) and, for
    values with an invisible character inside, the visible part."""
    v = value.replace("\u200b", "")
    out = {value.encode(), v.encode(), v.lower().encode()}
    return sorted(out)


@pytest.fixture
def leaky_vault(vault_path, with_model):
    for kind, value, text in SECRETS:
        (vault_path / "Projects" / f"leak-{kind}.md").write_text(f"# Leak {kind}\n\n{text.format(v=value)}\n", encoding="utf-8")
    secure = vault_path / "Operations" / "Secure"
    secure.mkdir(parents=True, exist_ok=True)
    (secure / "Stripe.md").write_text(
        "---\ntitle: Stripe keys\n---\n# Stripe keys\n\nWhere the quagga billing keys live.\n\n"
        "STRIPE_SECRET_KEY: sk_live_51QuaggaSecureNoteKeyAbCd\nSTRIPE_WEBHOOK_ID: whid9Quagga77\n"
        "Rotation: every 90 days, stored in 1Password \"Quagga billing\".\n", encoding="utf-8")
    mem = vault_path / MEMORY_DIR / "Facts"
    mem.mkdir(parents=True, exist_ok=True)
    (mem / "okapi-token-abc.md").write_text(
        "---\nid: mem-okapi-hand-edit\ntype: fact\ntitle: Okapi deploy token\nstatus: active\n"
        "tags: [okapi]\n---\nThe okapi deploy uses token glpat-OkapiHandEditedToken123 for the registry.\n", encoding="utf-8")
    return vault_path


EXTRA = {"secure": "sk_live_51QuaggaSecureNoteKeyAbCd", "secure-id": "whid9Quagga77", "memory": "glpat-OkapiHandEditedToken123"}


def _all_needles() -> list[tuple[str, bytes]]:
    return [(k, n) for k, v, _ in SECRETS for n in _needles(v)] + [(k, v.encode()) for k, v in EXTRA.items()] + \
        [(k, v.lower().encode()) for k, v in EXTRA.items()]


def _state_leaks(state: Path) -> list[str]:
    needles = _all_needles()
    return sorted({f"{k} in {f.relative_to(state)}" for f in state.rglob("*") if f.is_file()
                   for k, n in needles if n in f.read_bytes()})


def _text_leaks(text: str) -> list[str]:
    low = text.encode().lower()
    return sorted({k for k, n in _all_needles() if n.lower() in low})


def test_no_secret_leaves_through_any_read(leaky_vault, tmp_path):
    state = tmp_path / "state"
    res = run("rebuild-index", "--quiet")
    assert res["vectors"]["embedded"] > 0
    # The notes on disk are the user's: untouched.
    assert "AKIAQWERTYUIOPASDFGH" in (leaky_vault / "Projects" / "leak-aws-access.md").read_text()
    assert _state_leaks(state) == []

    outputs: dict[str, str] = {}
    for q in ("quokka bucket upload key", "marmot google token", "narwhal blob account", "ocelot release token",
              "pangolin runner bot", "tapir deploy billing", "wombat model key", "yak admin deploy key",
              "zebu host key postgres", "coati redis db password", "dingo cluster password archive key"):
        for scope in ("full-vault", "tiered"):
            outputs[f"recall {q} {scope}"] = json.dumps(run("recall", q, "--scope", scope), ensure_ascii=False)
        outputs[f"answer {q}"] = json.dumps(run("answer", q), ensure_ascii=False)
    outputs["get"] = json.dumps(run("get", "--memory-id", "mem-okapi-hand-edit"), ensure_ascii=False)
    outputs["browse"] = json.dumps(run("browse", "--path", "Projects"), ensure_ascii=False)
    for name, text in outputs.items():
        assert _text_leaks(text) == [], name
    # The notes are found (redacted), not hidden: a read still says where the key is mentioned.
    assert "leak-aws-access.md" in outputs["recall quokka bucket upload key full-vault"]
    assert "[redacted" in outputs["recall quokka bucket upload key full-vault"]
    assert "[redacted GitLab token]" in outputs["get"]

    # Operations/Secure/ notes are in full-vault recall, key names only.
    sec = run("recall", "quagga billing stripe keys", "--scope", "full-vault")
    hit = next(h for h in sec["hits"] if h["path"] == "Operations/Secure/Stripe.md")
    body = json.dumps(hit)
    assert "STRIPE_SECRET_KEY" in body and "STRIPE_WEBHOOK_ID" in body and "whid9Quagga77" not in body

    # The prompt hook (a real process, server down) and MCP (a real stdio server).
    hook_out = subprocess.run([sys.executable, "-m", "hive_brain", "hook", "prompt"], capture_output=True, text=True,
                              input=json.dumps({"prompt": "what key do quokka uploads use for the bucket?"}),
                              env=dict(os.environ), timeout=60)
    assert hook_out.returncode == 0, hook_out.stderr
    assert "Quokka" in hook_out.stdout and _text_leaks(hook_out.stdout) == []
    assert _text_leaks(_mcp_reads()) == []

    # doctor says where the secrets are: path, line and kind, never the value.
    doc = doctor()
    found = {(s["path"], s["kind"]) for s in doc["secrets"]}
    assert ("Projects/leak-aws-access.md", "AWS access key") in found
    assert ("Projects/leak-slack-webhook.md", "Slack webhook") in found
    assert ("Projects/leak-zero-width.md", "AWS access key") in found
    assert {s["line"] for s in doc["secrets"] if s["path"] == "Projects/leak-db-password.md"} == {6}
    assert len({p for p, _ in found}) >= len(SECRETS)
    assert _text_leaks(json.dumps(doc)) == []
    human = CliRunner().invoke(main, ["doctor"])
    assert "Projects/leak-aws-access.md:3" in human.output and _text_leaks(human.output) == []

    # And still nothing in any file of the state dir once everything above has run.
    assert _state_leaks(state) == []


def _mcp_reads() -> str:
    import asyncio

    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters, stdio_client

    texts: list[str] = []

    async def go() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"], env=dict(os.environ))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            for q in ("tapir billing stripe cards", "pangolin alerts bot", "okapi deploy token registry"):
                for tool, args in (("recall", {"query": q}), ("answer", {"question": q})):
                    res = await s.call_tool(tool, args)
                    texts.extend(c.text for c in res.content if getattr(c, "type", "") == "text")
            res = await s.call_tool("get", {"memory_id": "mem-okapi-hand-edit"})
            texts.extend(c.text for c in res.content if getattr(c, "type", "") == "text")
            res = await s.call_tool("core", {})
            texts.extend(c.text for c in res.content if getattr(c, "type", "") == "text")

    asyncio.run(go())
    out = "\n".join(texts)
    assert "Tapir" in out and "redacted" in out
    return out


def test_an_edit_that_adds_a_secret_is_scrubbed_by_the_next_write(vault_path, tmp_path):
    """The incremental path (a write's catch-up), not only a rebuild; replay of the old generation too."""
    remember("Capybara cache", "The capybara cache holds thumbnails for a day.", "fact")
    note = vault_path / "Projects" / "capybara.md"
    note.write_text("# Capybara\n\nThe capybara CDN key is sk_live_51CapybaraLiveKeyAbCdEf for now.\n", encoding="utf-8")
    remember("Capybara thumbnails", "Thumbnails are 256 pixels wide.", "fact")
    hits = run("recall", "capybara CDN key", "--scope", "full-vault")
    assert any(h["path"] == "Projects/capybara.md" for h in hits["hits"])
    assert "sk_live_51Capybara" not in json.dumps(hits)
    for f in (tmp_path / "state").rglob("*"):
        if f.is_file():
            assert b"sk_live_51Capybara" not in f.read_bytes() and b"sk_live_51capybara" not in f.read_bytes(), f
    gens = run("generations")
    replay = run("replay", "capybara CDN key", "--generation", str(gens["current"]))
    assert "sk_live_51Capybara" not in json.dumps(replay)


def test_a_cp1252_note_holding_a_secret_is_stored_scrubbed(vault_path, tmp_path):
    """A note saved by an older editor in CP-1252 is read and indexed; the copy of its bytes the
    generation store keeps for replay was kept as it was, secret and all (found in issue 30)."""
    note = vault_path / "Projects" / "caf\u00e9.md"
    note.write_bytes("# Caf\u00e9\n\nThe caf\u00e9 upload key is AKIAQWERTYCAFE1252XY, cr\u00e8me only.\n".encode("cp1252"))
    run("rebuild-index")
    hits = run("recall", "cafe upload key", "--scope", "full-vault")
    assert any(h["path"] == "Projects/caf\u00e9.md" for h in hits["hits"])
    for f in (tmp_path / "state").rglob("*"):
        if f.is_file():
            assert b"AKIAQWERTYCAFE1252XY" not in f.read_bytes() and b"akiaqwertycafe1252xy" not in f.read_bytes(), f
    gens = run("generations")
    replay = run("replay", "cafe upload key", "--generation", str(gens["current"]))
    assert "AKIAQWERTYCAFE1252XY" not in json.dumps(replay) and "cr\u00e8me" in json.dumps(replay, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------- writes
GH = "ghp_WriteFieldTok3nAbCdEfGhIjKlMnOpQrSt"


@pytest.mark.parametrize("args, field", [
    (["--title", f"deploy {GH}"], "--title"),
    (["--content", f"use {GH}"], "--content"),
    (["--tags", f"ci,{GH}"], "--tags"),
    (["--project", GH], "--project"),
    (["--memory-key", f"fact/{GH}"], "--memory-key"),
])
def test_remember_refuses_a_secret_in_every_field(vault_path, args, field):
    base = {"--title": "Deploy token location", "--content": "The deploy token is in 1Password."}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    flat = [x for kv in base.items() for x in kv]
    res = CliRunner().invoke(main, ["remember", "--type", "fact", *flat, "--json"])
    assert res.exit_code != 0
    assert field in res.output and "GitHub token" in res.output and GH not in res.output
    assert not list((vault_path / MEMORY_DIR).rglob("*.md"))


@pytest.mark.parametrize("opt", ["--tags", "--project", "--title", "--content"])
def test_update_refuses_a_secret_in_every_field(vault_path, opt):
    mid = remember("Deploy token location", "The deploy token is in 1Password.", "fact")["id"]
    res = CliRunner().invoke(main, ["update", "--memory-id", mid, opt, f"x {GH}", "--json"])
    assert res.exit_code != 0 and opt in res.output and GH not in res.output


def test_evolve_refuses_a_secret(vault_path):
    mid = remember("Deploy token location", "The deploy token is in 1Password.", "fact")["id"]
    res = CliRunner().invoke(main, ["evolve", "--memory-id", mid, "--content", f"now it is {GH}", "--json"])
    assert res.exit_code != 0 and "--content" in res.output and GH not in res.output


@pytest.mark.parametrize("field, value", [("aliases", [f"x {GH}"]), ("tags", ["ok", GH]), ("project", GH), ("task", GH)])
def test_batch_refuses_a_secret_in_every_field(vault_path, tmp_path, field, value):
    rec = {"type": "fact", "title": "Deploy token location", "content": "The deploy token is in 1Password.", field: value}
    f = tmp_path / "batch.json"
    f.write_text(json.dumps([rec]), encoding="utf-8")
    res = CliRunner().invoke(main, ["batch", "--file", str(f), "--json"])
    assert f"--{field}" in res.output and GH not in res.output, res.output
    assert not list((vault_path / MEMORY_DIR).rglob("*.md"))


def test_mcp_remember_refuses_a_secret_in_tags(vault_path):
    import asyncio

    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters, stdio_client

    seen: dict = {}

    async def go() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "hive_brain", "mcp"],
                                       env=dict(os.environ, HIVE_AGENT_ID="codex"))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("remember", {"type": "fact", "title": "Deploy token", "content": "In 1Password.",
                                                 "tags": ["ci", GH]})
            seen["res"] = (res.is_error, "".join(c.text for c in res.content if getattr(c, "type", "") == "text"))

    asyncio.run(go())
    is_error, msg = seen["res"]
    assert is_error and "tags=" in msg and GH not in msg  # MCP errors name the tool field, not the CLI flag


def test_conversation_capture_redacts_the_new_formats():
    from hive_brain.store.secrets import redact

    text = ("export GITHUB_TOKEN=abcd1234efgh5678\nDB_PASSWORD=Zq9-x7Lm\nprod db password is hunter2-Xy9!kLm\n"
            "redis://:Rz9pw0rd@cache:6379 https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/CcCcCcCcCcCcCcCc\n"
            "AKIA\u200bIOSFODNN7EXAMPLE")
    red, n = redact(text)
    assert n == 6
    for v in ("abcd1234efgh5678", "Zq9-x7Lm", "hunter2-Xy9!kLm", "Rz9pw0rd", "CcCcCcCc", "IOSFODNN7EXAMPLE"):
        assert v not in red


def test_an_index_from_before_scrubbing_is_cleaned_by_the_full_pass(vault_path, tmp_path):
    """Older versions stored note bytes as they were: the full pass an upgrade triggers replaces them."""
    import sqlite3

    from hive_brain.store.fsutil import sha256_bytes

    value = b"sk_live_51UpgradeLeftoverKeyAbCd"
    note = vault_path / "Projects" / "upgrade.md"
    note.write_bytes(b"# Upgrade\n\nThe ferret billing key is " + value + b".\n")
    run("rebuild-index", "--quiet", "--lexical-only")
    state = next((tmp_path / "state").glob("*/generations"))
    sha = sha256_bytes(note.read_bytes())
    db = sqlite3.connect(state / "objects.sqlite")
    old = b"# Upgrade\n\nAn older version of the note: key " + value + b" then.\n"
    with db:  # what an older version left: the raw bytes under their hash, and an old generation's note
        db.execute("UPDATE objects SET data = ? WHERE sha = ?", (note.read_bytes(), sha))
        db.execute("INSERT INTO objects VALUES (?, ?)", (sha256_bytes(old), old))
        db.execute("PRAGMA user_version = 0")
    db.close()
    assert any(value in f.read_bytes() for f in state.glob("objects.sqlite*"))
    run("rebuild-index", "--quiet", "--lexical-only")
    for f in (tmp_path / "state").rglob("*"):
        if f.is_file():
            assert value not in f.read_bytes() and value.lower() not in f.read_bytes(), f
    from hive_brain.index.generations import GenerationStore

    assert b"[redacted Stripe key]" in GenerationStore(state.parent).get_object(sha256_bytes(old))  # still verifies
    hits = run("recall", "ferret billing key", "--scope", "full-vault")
    assert hits["hits"] and value.decode() not in json.dumps(hits)


def test_the_warm_server_and_the_hook_through_it_never_see_the_value(vault_path, tmp_path):
    """A note saved while the server runs: its watcher indexes it; recall, answer and the prompt hook
    (answered by the server) show it redacted."""
    from hive_brain.rpc import client
    from tests.test_server import START_TIMEOUT, _save_like_an_editor, _serve, _state, _stop, _wait_for

    state = _state()
    proc = _serve(tmp_path)
    try:
        client.wait_ready(state, START_TIMEOUT, proc=proc)
        value = "xoxb-556677889900-112233445566-JackalServerBotTok"
        _save_like_an_editor(vault_path / "Projects" / "jackal.md", f"# Jackal\n\nJackal alerts post with {value} daily.\n")

        def found() -> bool:
            res = client.call(state, "recall", {"query": "jackal alerts", "scope": "full-vault"}, timeout=5)
            return any(h["path"] == "Projects/jackal.md" for h in res["hits"])

        _wait_for(found, 10)
        outs = [json.dumps(client.call(state, "recall", {"query": "jackal alerts post", "scope": "full-vault"}, timeout=5)),
                json.dumps(client.call(state, "answer", {"query": "how do jackal alerts post?"}, timeout=5))]
        hook_out = subprocess.run([sys.executable, "-m", "hive_brain", "hook", "prompt"], capture_output=True, text=True,
                                  input=json.dumps({"prompt": "how do jackal alerts post?"}), env=dict(os.environ),
                                  timeout=60)
        outs.append(hook_out.stdout)
        assert "Jackal" in hook_out.stdout and "[redacted Slack token]" in hook_out.stdout
        for out in outs:
            assert value not in out and "JackalServerBotTok".lower() not in out.lower()
        for f in state.rglob("*"):
            if f.is_file() and not f.is_socket():
                assert b"JackalServerBotTok" not in f.read_bytes() and b"jackalserverbottok" not in f.read_bytes(), f
    finally:
        _stop(proc)
