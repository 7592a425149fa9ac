"""A model of the user's choice: a sentence-transformers / hub-layout folder (`model install --from`), a
download from a model hub (`--download`, against a loopback stand-in of the hub), `model use`, and which
pack answers. The model is the real default pack laid out as the hub lays a model out."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from hive_brain.embedding import install as pack_install
from hive_brain.embedding import pack as modelpack
from hive_brain.errors import ModelError
from tests.helpers import run

HUB_NAME = "acme/e5-small-hub"


def _hub_layout(pack_dir: Path, dest: Path) -> Path:
    """The default pack's model as a sentence-transformers folder with its ONNX export under onnx/."""
    (dest / "onnx").mkdir(parents=True)
    (dest / "1_Pooling").mkdir()
    shutil.copyfile(pack_dir / "model.onnx", dest / "onnx" / "model.onnx")
    shutil.copyfile(pack_dir / "tokenizer.json", dest / "tokenizer.json")
    (dest / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}))
    (dest / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (dest / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: ", "document": "passage: "}}))
    (dest / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512}))
    return dest


class _Hub(http.server.SimpleHTTPRequestHandler):
    """`/<org>/<name>/resolve/<rev>/<file>` served from a folder per model, as the hub serves files;
    every path asked for is recorded. ``truncate``: announce more bytes than are sent (a cut download)."""

    truncate = False

    def __init__(self, *a, root: Path, seen: list[str], **kw):
        self.root, self.seen = root, seen
        super().__init__(*a, directory=str(root), **kw)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append(self.path)
        parts = self.path.lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            self.send_error(404)
            return
        f = self.root / parts[0] / parts[1] / "/".join(parts[4:])
        if not f.is_file():
            self.send_error(404)
            return
        data = f.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data) * (2 if self.truncate and f.suffix == ".onnx" else 1)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a) -> None:
        pass


@contextmanager
def _serve(root: Path, *, truncate: bool = False) -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("H", (_Hub,), {"truncate": truncate})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, root=root, seen=seen))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", seen
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)


@pytest.fixture
def hub_root(pack_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "hub"
    _hub_layout(pack_dir, root / HUB_NAME)
    return root


def test_a_hub_layout_folder_installs_with_the_settings_its_files_state(pack_dir: Path, tmp_path: Path) -> None:
    src = _hub_layout(pack_dir, tmp_path / "multilingual-e5-small-st")
    installed = pack_install.install_from(src, tmp_path / "models")
    man = modelpack.read_manifest(installed)
    assert installed.name == "multilingual-e5-small-st"
    assert (man["pooling"], man["normalize"], man["query_prefix"], man["passage_prefix"], man["max_tokens"]) == (
        "mean", True, "query: ", "passage: ", 512)
    assert man["dim"] == 384 and modelpack.verify(installed) == []
    # The same weights and settings as the default pack: the same vectors (only the id differs).
    from hive_brain.embedding.embedder import Embedder

    texts = ["Deploys go to Fly.io since March.", "部署在 Fly.io 上"]
    a = Embedder.load(installed).embed_passages(texts)
    b = Embedder.load(pack_dir).embed_passages(texts)
    assert np.allclose(a, b, atol=1e-5)


def test_cls_pooling_and_no_normalize_are_read_not_guessed(pack_dir: Path, tmp_path: Path) -> None:
    src = _hub_layout(pack_dir, tmp_path / "other-model")
    (src / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    (src / "modules.json").write_text(json.dumps([{"type": "sentence_transformers.models.Transformer"}]))
    (src / "config_sentence_transformers.json").unlink()
    man = modelpack.read_manifest(pack_install.install_from(src, tmp_path / "models"))
    assert (man["pooling"], man["normalize"], man["query_prefix"]) == ("cls", False, "")
    (src / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(ModelError, match="pooling_mode_max_tokens"):
        pack_install.install_from(src, tmp_path / "models", pack_id="max-pooled")


def test_a_torch_only_folder_says_how_to_export_onnx(tmp_path: Path) -> None:
    src = tmp_path / "torch-model"
    src.mkdir()
    (src / "tokenizer.json").write_text("{}")
    (src / "model.safetensors").write_bytes(b"\0" * 16)
    models = tmp_path / "models"
    with pytest.raises(ModelError, match="no ONNX export") as e:
        pack_install.install_from(src, models)
    assert "optimum-cli export onnx" in (e.value.hint or "")
    assert not models.exists() or not list(models.iterdir())


def test_download_from_a_hub_then_use_it(hub_root: Path, pack_dir: Path, tmp_path: Path, monkeypatch,
                                         vault_path: Path) -> None:
    models = tmp_path / "models"
    shutil.copytree(pack_dir, models / modelpack.DEFAULT_PACK_ID)  # the default is there too, and preferred
    monkeypatch.setenv("HIVE_BRAIN_CONFIG", str(tmp_path / "config.toml"))
    with _serve(hub_root) as (url, seen):
        monkeypatch.setenv("HIVE_BRAIN_HUB_ENDPOINT", url)
        res = run("model", "install", "--download", HUB_NAME, "--use")
    assert res["modelId"] == "e5-small-hub" and res["dim"] == 384 and res["embeddingPack"] == "e5-small-hub"
    assert f"/{HUB_NAME}/resolve/main/onnx/model.onnx" in seen and f"/{HUB_NAME}/resolve/main/tokenizer.json" in seen
    assert not list(models.glob(".download-*")) and not list(models.glob(".building-*"))
    man = modelpack.read_manifest(models / "e5-small-hub")
    assert man["source"] == f"{url}/{HUB_NAME}@main" and man["query_prefix"] == "query: "
    assert 'embedding_pack = "e5-small-hub"' in (tmp_path / "config.toml").read_text()

    status = run("model", "status")
    assert status["embeddingPack"] == "e5-small-hub" and status["pack"] == str(models / "e5-small-hub")
    assert sorted(p["id"] for p in status["packs"]) == ["e5-small-hub", modelpack.DEFAULT_PACK_ID]
    # Recall answers with it: the index's vectors are tagged with its pack key.
    from hive_brain.engine import Engine

    assert Engine.open().indexer.pack_key == modelpack.pack_key(man)

    back = run("model", "use", "default")
    assert back["embeddingPack"] is None
    assert Engine.open().indexer.pack_dir == models / modelpack.DEFAULT_PACK_ID
    missing = run("model", "use", "no-such-pack", ok=False)
    assert missing["_exit"] == 1 and "e5-small-hub" in missing["message"]


def test_a_cut_download_leaves_nothing(hub_root: Path, tmp_path: Path, monkeypatch) -> None:
    models = tmp_path / "models"
    with _serve(hub_root, truncate=True) as (url, _seen):
        monkeypatch.setenv("HIVE_BRAIN_HUB_ENDPOINT", url)
        res = run("model", "install", "--download", HUB_NAME, ok=False)
    assert res["_exit"] == 1 and ("ended after" in res["message"] or "could not download" in res["message"]), res
    assert not models.exists() or not [p for p in models.iterdir()]


def test_no_hub_says_what_to_do(tmp_path: Path, monkeypatch) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HIVE_BRAIN_HUB_ENDPOINT", f"http://127.0.0.1:{port}")
    res = run("model", "install", "--download", HUB_NAME, ok=False)
    assert res["_exit"] == 1 and "could not download" in res["message"] and "--from DIR" in res["hint"], res
    bad = run("model", "install", "--download", "../../etc", ok=False)
    assert bad["_exit"] == 1 and "not a model name" in bad["message"]
    with _serve(tmp_path / "empty-hub") as (url, _seen):
        monkeypatch.setenv("HIVE_BRAIN_HUB_ENDPOINT", url)
        res = run("model", "install", "--download", "acme/nothing", ok=False)
    assert res["_exit"] == 1 and "has no acme/nothing" in res["message"]
    assert not (tmp_path / "models").exists() or not list((tmp_path / "models").iterdir())
