"""A model of the user's choice: a sentence-transformers / Hugging Face model folder, local or fetched
from a model hub, installed as an embedding pack (:func:`.install.install_from`).

A folder in the hub's layout keeps its ONNX export under ``onnx/`` (``model.onnx``, or a quantised
variant), the tokenizer at its root and sentence-transformers' settings beside it:
``1_Pooling/config.json`` (pooling), ``modules.json`` (a ``Normalize`` module),
``config_sentence_transformers.json`` (the query and passage prompts) and ``sentence_bert_config.json``
(``max_seq_length``). These settings shape every vector, so they are read, not guessed, and the
manifest records them (they are part of the pack key). A folder with PyTorch or safetensors weights
only cannot run without torch: the error says how to export ONNX.

Downloading uses the standard library only (no hub client): the files of one revision are fetched
from ``<endpoint>/<org>/<name>/resolve/<revision>/<file>``, each into a ``.part`` file renamed when
complete, then installed like a local folder. Only a user's explicit ``model install --download``
fetches anything; nothing downloads at run time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ModelError
from .pack import MODEL_FILE, PACK_ID_RE, TOKENIZER_FILE

__all__ = ["MAX_TOKENS", "download", "download_dir", "hub_settings", "model_file", "pack_id_for", "remove"]

# Longer inputs cost quadratically in attention and notes are split into passages far shorter than
# this anyway; a model that accepts 8,192 tokens (bge-m3) is run at this length.
MAX_TOKENS = 512
# Where an ONNX export may sit in a model folder, most usual first (the hub's optimum exports).
ONNX_CANDIDATES = (MODEL_FILE, "onnx/model.onnx", "onnx/model_quantized.onnx", "onnx/model_int8.onnx",
                   "onnx/model_qint8_avx512_vnni.onnx")
SETTINGS_FILES = ("1_Pooling/config.json", "modules.json", "config_sentence_transformers.json",
                  "sentence_bert_config.json", "config.json")
TORCH_ONLY = ("model.safetensors", "pytorch_model.bin")
HUB_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
TIMEOUT_S = 30.0
CHUNK = 1 << 20

Progress = Callable[[str, int, int], None]


def model_file(src: Path) -> Path:
    """The ONNX model inside a model folder; ModelError saying what to do when there is none."""
    for rel in ONNX_CANDIDATES:
        if (src / rel).is_file():
            return src / rel
    torch = [name for name in TORCH_ONLY if (src / name).is_file()]
    if torch:
        raise ModelError(
            f"{src} holds {torch[0]} but no ONNX export, and hive-brain runs models without torch",
            hint=f"export one where torch is installed (`optimum-cli export onnx --model {src} {src}/onnx`), "
                 "or use the model's own onnx/ folder from the hub",
        )
    raise ModelError(f"{src} has no model.onnx (looked for {', '.join(ONNX_CANDIDATES)})",
                     hint="point --from at a folder with an ONNX export and tokenizer.json")


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"unreadable {path}: {exc}") from None


def hub_settings(src: Path, name: str) -> dict[str, Any]:
    """The settings that shape the vectors (pooling, normalize, prefixes, max_tokens) as the folder's
    sentence-transformers files state them; keys are left out where the folder says nothing (the
    pack's defaults then hold). ``name``: the model's name, for the one family whose prefixes its
    files do not state (e5 expects "query: " / "passage: ")."""
    out: dict[str, Any] = {}
    pooling = _json_file(src / "1_Pooling" / "config.json")
    if isinstance(pooling, dict):
        if pooling.get("pooling_mode_cls_token"):
            out["pooling"] = "cls"
        elif pooling.get("pooling_mode_mean_tokens"):
            out["pooling"] = "mean"
        else:
            modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v)
            raise ModelError(f"{src} pools with {', '.join(modes) or 'no mode'}; hive-brain supports mean and CLS pooling")
    modules = _json_file(src / "modules.json")
    if isinstance(modules, list):
        out["normalize"] = any(isinstance(m, dict) and str(m.get("type", "")).endswith(".Normalize") for m in modules)
    st = _json_file(src / "config_sentence_transformers.json")
    prompts = st.get("prompts") if isinstance(st, dict) else None
    if isinstance(prompts, dict) and prompts:
        out["query_prefix"] = str(prompts.get("query") or "")
        out["passage_prefix"] = str(prompts.get("document") or prompts.get("passage") or "")
    elif re.search(r"(^|[-_/])e5([-_]|$)", name.lower()):
        out["query_prefix"], out["passage_prefix"] = "query: ", "passage: "
    sb = _json_file(src / "sentence_bert_config.json")
    seq = sb.get("max_seq_length") if isinstance(sb, dict) else None
    if isinstance(seq, int) and seq > 0:
        out["max_tokens"] = min(seq, MAX_TOKENS)
    return out


def pack_id_for(name: str) -> str:
    """A pack id from a model's name ("intfloat/multilingual-e5-base" -> "multilingual-e5-base")."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    pid = re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-._")[:100]
    if not pid or not PACK_ID_RE.fullmatch(pid):
        raise ModelError(f"cannot make a pack id from {name!r}", hint="give one with --id")
    return pid


# ---------------------------------------------------------------------------------------------- download
def _url(endpoint: str, name: str, revision: str, rel: str) -> str:
    return f"{endpoint.rstrip('/')}/{name}/resolve/{urllib.parse.quote(revision, safe='')}/{rel}"


def _fetch(url: str, dest: Path, label: str, progress: Progress | None) -> bool:
    """``url`` into ``dest`` (False: the hub has no such file). The bytes land in ``dest.part`` and
    are renamed when complete, so an interrupted download never looks like a model."""
    req = urllib.request.Request(url, headers={"User-Agent": "hive-brain"})
    token = os.environ.get("HF_TOKEN")  # a gated model's token, as the hub's own client reads it
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        resp = urllib.request.urlopen(req, timeout=TIMEOUT_S)  # noqa: S310 - the user's endpoint, http(s) checked
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        if exc.code in (401, 403):
            raise ModelError(f"{url} refused the download ({exc.code})",
                             hint="a gated model needs HF_TOKEN set to an access token") from None
        raise ModelError(f"{url} answered {exc.code} {exc.reason}") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with resp, open(part, "wb") as f:
        total = int(resp.headers.get("Content-Length") or 0)
        done = 0
        while chunk := resp.read(CHUNK):
            f.write(chunk)
            done += len(chunk)
            if progress is not None:
                progress(label, done, total)
        if total and done != total:
            raise ModelError(f"{url} ended after {done:,} of {total:,} bytes", hint="run the command again")
    os.replace(part, dest)
    return True


def download(name: str, dest: Path, *, endpoint: str, revision: str = "main",
             progress: Progress | None = None) -> Path:
    """Fetch model ``name`` ("org/model") from a model hub into ``dest`` (a new folder in the hub's
    layout) and return it. ``endpoint``: the ``hub_endpoint`` setting. ModelError with what to do
    next when the hub cannot be reached."""
    if not HUB_NAME_RE.fullmatch(name) or ".." in name:
        raise ModelError(f"{name!r} is not a model name", hint="use the hub's form, e.g. intfloat/multilingual-e5-base")
    scheme = urllib.parse.urlsplit(endpoint).scheme
    if scheme not in ("http", "https"):
        raise ModelError(f"the model hub endpoint {endpoint!r} is not an http(s) address",
                         hint="set hub_endpoint (HIVE_BRAIN_HUB_ENDPOINT) to e.g. https://huggingface.co")
    t0 = time.monotonic()
    try:
        if not _fetch(_url(endpoint, name, revision, TOKENIZER_FILE), dest / TOKENIZER_FILE, TOKENIZER_FILE, None):
            raise ModelError(f"{endpoint} has no {name} (revision {revision}) with a {TOKENIZER_FILE}",
                             hint="check the name on the hub; hive-brain needs the model's fast tokenizer")
        for rel in SETTINGS_FILES:
            _fetch(_url(endpoint, name, revision, rel), dest / rel, rel, None)
        for rel in ONNX_CANDIDATES:
            if _fetch(_url(endpoint, name, revision, rel), dest / rel, "model", progress):
                break
        else:
            raise ModelError(f"{name} has no ONNX export on {endpoint} (looked for {', '.join(ONNX_CANDIDATES)})",
                             hint="pick a model with an onnx/ folder, or export one and use --from DIR")
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ModelError(
            f"could not download {name} from {endpoint}: {reason} (after {time.monotonic() - t0:.1f} s)",
            hint="on a machine without internet, copy the model's folder here and run "
                 "`hive-brain model install --from DIR`",
        ) from None
    return dest


def download_dir(model_dir: Path) -> Path:
    """A fresh folder for one download, beside the packs (same file system), removed by the caller."""
    model_dir.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".download-", dir=model_dir))


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
