"""A model's embedding tables read from the file on demand, not copied into each session.

An ONNX session copies every weight into its own memory. For a lookup table (an initializer whose
only readers are ``Gather`` nodes: the word embeddings) that copy is mostly dead weight: e5's
250k-token table is 54 of the model's 68 MB, and a question reads a dozen rows of it. Here such
tables are mapped from ``model.onnx`` itself (read-only, ``numpy.memmap``) and handed to the session
as its initializers (``SessionOptions.add_initializer``: ONNX Runtime uses the buffer in place), so
only the pages of tokens actually seen become resident, as clean file pages the kernel can drop.
Measured on e5 (one-thread question session): 71 -> 31 MB anonymous memory, the same vectors bit for
bit (docs/benchmarks.md, issue 26).

A table stored quantized and dequantized in the graph (``Cast`` to float, ``Mul`` by its scales, then
the ``Gather``: the reranker's int8 MiniLM) was worse off: ONNX Runtime folds the constant chain into
a float32 table four times the stored one (47 MB) in each session. For such a chain the graph the
session loads is rewritten to gather the stored rows (and their scales when per row) first and
dequantize only those, and the stored table is mapped as above: each element is the same
``float(q) * scale``, so the vectors are the same bit for bit (MiniLM's question session 113 -> 68 MB
anonymous; docs/benchmarks.md, issue 26, stop 38).

The model file is read (and that rewrite written) with a minimal protobuf walker (field numbers from
onnx.proto), so the ``onnx`` package stays a build-time dependency only.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Smaller tables are not worth a mapping (the position embeddings, layer norms, ...).
MIN_BYTES = 1 << 20

# onnx.proto field numbers
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_OUTPUT, _GRAPH_VALUE_INFO = 1, 5, 12, 13
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP_TYPE, _NODE_ATTRIBUTE = 1, 2, 4, 5
_ATTR_NAME, _ATTR_I = 1, 3
_VALUE_INFO_NAME = 1
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_NAME, _TENSOR_RAW_DATA = 1, 2, 8, 9
# TensorProto.DataType -> numpy; anything else is left to the session
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64, 10: np.float16,
           11: np.float64}

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


@dataclass
class _Tensor:
    name: str = ""
    dims: list[int] = field(default_factory=list)
    data_type: int = 0
    offset: int = -1  # of raw_data in the file
    size: int = 0


@dataclass
class _Node:
    span: tuple[int, int]  # the whole graph field (key to end) in the file
    payload: tuple[int, int]
    op: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    axis: int = 0  # Gather's


@dataclass
class _Graph:
    span: tuple[int, int]  # the model's graph field
    payload: tuple[int, int]
    fields: list[tuple[int, tuple[int, int]]] = field(default_factory=list)  # (number, span) in order
    nodes: list[_Node] = field(default_factory=list)
    tensors: list[_Tensor] = field(default_factory=list)
    value_info: dict[tuple[int, int], str] = field(default_factory=dict)  # span -> name
    outputs: set[str] = field(default_factory=set)


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _spans(buf: Any, start: int, end: int) -> Any:
    """(field number, wire type, value or (start, end) of a LEN payload, (start, end) of the whole
    field) of one message's fields."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value, (first, pos)
        elif wire == _LEN:
            n, pos = _varint(buf, pos)
            yield number, wire, (pos, pos + n), (first, pos + n)
            pos += n
        elif wire == _I64:
            pos += 8
            yield number, wire, None, (first, pos)
        elif wire == _I32:
            pos += 4
            yield number, wire, None, (first, pos)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    if pos != end:
        raise ValueError("a protobuf field runs past its message")


def _fields(buf: Any, start: int, end: int) -> Any:
    """(field number, wire type, value or (start, end) of a LEN payload) of one message's fields."""
    for number, wire, value, _span in _spans(buf, start, end):
        yield number, wire, value


def _text(buf: Any, span: tuple[int, int]) -> str:
    return bytes(buf[span[0]:span[1]]).decode("utf-8")


def _tensor(buf: Any, start: int, end: int) -> _Tensor:
    t = _Tensor()
    for number, wire, value in _fields(buf, start, end):
        if number == _TENSOR_DIMS:
            if wire == _LEN:  # packed
                a, b = value
                while a < b:
                    d, a = _varint(buf, a)
                    t.dims.append(d)
            else:
                t.dims.append(value)
        elif number == _TENSOR_DATA_TYPE:
            t.data_type = value
        elif number == _TENSOR_NAME:
            t.name = _text(buf, value)
        elif number == _TENSOR_RAW_DATA:
            t.offset, t.size = value[0], value[1] - value[0]
    return t


def _node(buf: Any, span: tuple[int, int], payload: tuple[int, int]) -> _Node:
    node = _Node(span, payload)
    for number, wire, value in _fields(buf, *payload):
        if wire != _LEN:
            continue
        if number == _NODE_INPUT:
            node.inputs.append(_text(buf, value))
        elif number == _NODE_OUTPUT:
            node.outputs.append(_text(buf, value))
        elif number == _NODE_OP_TYPE:
            node.op = _text(buf, value)
        elif number == _NODE_ATTRIBUTE:
            attr = dict((n, v) for n, _w, v in _fields(buf, *value))
            if _ATTR_NAME in attr and _text(buf, attr[_ATTR_NAME]) == "axis" and _ATTR_I in attr:
                node.axis = attr[_ATTR_I]
    return node


def _graph(buf: Any) -> _Graph | None:
    graph = None
    for number, wire, value, span in _spans(buf, 0, len(buf)):
        if number == _MODEL_GRAPH and wire == _LEN:
            graph = _Graph(span, value)
    if graph is None:
        return None
    for number, wire, value, span in _spans(buf, *graph.payload):
        graph.fields.append((number, span))
        if wire != _LEN:
            continue
        if number == _GRAPH_INITIALIZER:
            graph.tensors.append(_tensor(buf, *value))
        elif number == _GRAPH_NODE:
            graph.nodes.append(_node(buf, span, value))
        elif number in (_GRAPH_VALUE_INFO, _GRAPH_OUTPUT):
            name = next((_text(buf, v) for n, w, v in _fields(buf, *value) if n == _VALUE_INFO_NAME and w == _LEN), "")
            if number == _GRAPH_OUTPUT:
                graph.outputs.add(name)
            else:
                graph.value_info[span] = name
    return graph


@dataclass
class _Dequantized:
    """A table stored quantized: ``Cast(q) -> Mul(by scale) -> Gather`` nodes."""

    table: _Tensor
    scale: _Tensor
    cast: _Node
    mul: _Node
    gathers: list[_Node]
    per_row: bool  # the scale has one row per table row: gathered with it


def _mappable(t: _Tensor, min_bytes: int) -> bool:
    dtype = _DTYPES.get(t.data_type)
    return (dtype is not None and t.offset >= 0 and t.size >= min_bytes
            and t.size == int(np.prod(t.dims, dtype=np.int64)) * np.dtype(dtype).itemsize)


def _plan(graph: _Graph, min_bytes: int) -> tuple[list[_Tensor], list[_Dequantized]]:
    """The tables read only by ``Gather`` (as the table, input 0), and the quantized ones read only
    through a ``Cast`` and ``Mul`` chain whose values nothing else reads."""
    readers: dict[str, list[tuple[_Node, int]]] = {}
    producer: dict[str, _Node] = {}
    for node in graph.nodes:
        for i, name in enumerate(node.inputs):
            readers.setdefault(name, []).append((node, i))
        for name in node.outputs:
            producer[name] = node
    inits = {t.name: t for t in graph.tensors}

    def only(name: str) -> _Node | None:
        r = readers.get(name, [])
        return r[0][0] if len(r) == 1 and name not in graph.outputs else None

    direct, chains = [], []
    for t in graph.tensors:
        if not _mappable(t, min_bytes) or t.name in producer or t.name in graph.outputs:
            continue
        uses = readers.get(t.name, [])
        if uses and all(n.op == "Gather" and i == 0 and n.axis == 0 for n, i in uses):
            direct.append(t)
            continue
        cast = only(t.name)
        if cast is None or cast.op != "Cast" or len(cast.outputs) != 1:
            continue
        mul = only(cast.outputs[0])
        if mul is None or mul.op != "Mul" or len(mul.inputs) != 2 or len(mul.outputs) != 1:
            continue
        scale = inits.get(mul.inputs[1 - mul.inputs.index(cast.outputs[0])])
        gathers = readers.get(mul.outputs[0], [])
        if (scale is None or scale.name in producer or not gathers or mul.outputs[0] in graph.outputs
                or not all(n.op == "Gather" and i == 0 and n.axis == 0 for n, i in gathers)):
            continue
        dims, rows = list(scale.dims), t.dims[0] if t.dims else -1
        per_row = len(dims) == len(t.dims) and len(dims) > 1 and dims[0] == rows and rows != 1
        # anything else must broadcast over the gathered rows as it did over the table's
        taken = {f"{n.outputs[0]}/rows_{x}" for n, _i in gathers for x in ("q", "f", "scale")} & (producer.keys() | inits.keys())
        if taken:
            continue
        if per_row or int(np.prod(dims, dtype=np.int64)) == 1 or (dims[-1:] == t.dims[-1:] and set(dims[:-1]) <= {1}):
            chains.append(_Dequantized(t, scale, cast, mul, [n for n, _i in gathers], per_row))
    return direct, chains


def lookup_tables(model: Path, min_bytes: int = MIN_BYTES) -> list[_Tensor]:
    """The initializers of ``model`` read only by ``Gather`` nodes (as the table, input 0), directly
    or dequantized on the way (``Cast`` + ``Mul``), stored as raw data of at least ``min_bytes``; []
    when the file is not what we can read."""
    return _read(model, min_bytes, rewrite=False)[0]


def _read(model: Path, min_bytes: int, *, rewrite: bool) -> tuple[list[_Tensor], bytes | None]:
    """``model``'s lookup tables, and (``rewrite``) the model to load instead of the file when a
    quantized one's dequantization moves after its gathers (else None)."""
    try:
        with open(model, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            graph = _graph(buf)
            if graph is None:
                return [], None
            direct, chains = _plan(graph, min_bytes)
            moved = _rewritten(buf, graph, chains) if rewrite and chains else None
            return direct + [c.table for c in chains], moved
    except (OSError, ValueError, IndexError, UnicodeDecodeError):  # the session's own load says what is wrong
        return [], None


def _key(number: int, wire: int) -> bytes:
    return _encode_varint(number << 3 | wire)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _encode_varint(len(payload)) + payload


def _node_bytes(buf: Any, like: _Node, op: str, inputs: list[str], outputs: list[str]) -> bytes:
    """A node of type ``op``: ``like``'s attributes (Cast's ``to``, Gather's ``axis``), new edges."""
    parts = [_len_field(_NODE_INPUT, n.encode()) for n in inputs]
    parts += [_len_field(_NODE_OUTPUT, n.encode()) for n in outputs]
    parts.append(_len_field(_NODE_OP_TYPE, op.encode()))
    parts += [bytes(buf[s[0]:s[1]]) for n, _w, _v, s in _spans(buf, *like.payload) if n == _NODE_ATTRIBUTE]
    return _len_field(_GRAPH_NODE, b"".join(parts))


def _rewritten(buf: Any, graph: _Graph, chains: list[_Dequantized]) -> bytes:
    """The model with each chain's dequantization moved after its gathers: ``Gather(q, ids)``,
    ``Gather(scale, ids)`` when per row, ``Cast``, ``Mul`` -> the gather's own output."""
    dropped = {c.cast.span for c in chains} | {c.mul.span for c in chains}
    gone = {name for c in chains for name in (c.cast.outputs[0], c.mul.outputs[0])}
    replace: dict[tuple[int, int], bytes] = {}
    for c in chains:
        for g in c.gathers:
            ids, out = g.inputs[1], g.outputs[0]
            q, f, s = f"{out}/rows_q", f"{out}/rows_f", f"{out}/rows_scale"
            mul_in = [f if name == c.cast.outputs[0] else (s if c.per_row else name) for name in c.mul.inputs]
            nodes = [_node_bytes(buf, g, "Gather", [c.table.name, ids], [q])]
            if c.per_row:
                nodes.append(_node_bytes(buf, g, "Gather", [c.scale.name, ids], [s]))
            nodes += [_node_bytes(buf, c.cast, "Cast", [q], [f]), _node_bytes(buf, c.mul, "Mul", mul_in, [out])]
            replace[g.span] = b"".join(nodes)
    with memoryview(buf) as view:  # slices of the file, copied once by the join
        parts: list[Any] = []
        for _number, span in graph.fields:
            if span in dropped or graph.value_info.get(span) in gone:
                continue  # the float table and its shape are no longer in the graph
            parts.append(replace.get(span) or view[span[0]:span[1]])
        start, end = graph.span
        size = sum(len(p) for p in parts)
        return b"".join([view[:start], _key(_MODEL_GRAPH, _LEN), _encode_varint(size), *parts, view[end:]])


class MappedTables:
    """A session's lookup tables mapped from its model file; must live as long as the session (ONNX
    Runtime reads the buffers in place and does not own them)."""

    def __init__(self, model: Path, options: Any, ort: Any) -> None:
        """Add ``model``'s lookup tables to session ``options`` as initializers read from the file."""
        self._maps: list[mmap.mmap] = []
        self._keep: list[Any] = []
        tables, moved = _read(model, MIN_BYTES, rewrite=True)
        self.rewritten = moved is not None
        self._model: str | bytes | None = moved if moved is not None else str(model)
        if not tables:
            return
        with open(model, "rb") as f:
            for t in tables:
                start = t.offset - t.offset % mmap.ALLOCATIONGRANULARITY
                m = mmap.mmap(f.fileno(), t.offset + t.size - start, access=mmap.ACCESS_READ, offset=start)
                table = np.frombuffer(m, dtype=_DTYPES[t.data_type], count=int(np.prod(t.dims)),
                                      offset=t.offset - start).reshape(t.dims)
                value = ort.OrtValue.ortvalue_from_numpy(table)
                options.add_initializer(t.name, value)
                self._maps.append(m)
                self._keep.append((table, value))

    def take_model(self) -> str | bytes:
        """What the session loads, once: the file's path, or the rewritten model (when a quantized
        table's dequantization moved after its gathers), whose bytes (the whole model, 23 MB for
        MiniLM) are then no longer held here for the session's life."""
        model, self._model = self._model, None
        if model is None:
            raise RuntimeError("the model was taken already")
        return model

    def __len__(self) -> int:
        return len(self._maps)
