"""A model's embedding tables read from the file on demand, not copied into each session.

An ONNX session copies every weight into its own memory. For a lookup table (an initializer whose
only readers are ``Gather`` nodes: the word embeddings) that copy is mostly dead weight: e5's
250k-token table is 54 of the model's 68 MB, and a question reads a dozen rows of it. Here such
tables are mapped from ``model.onnx`` itself (read-only, ``numpy.memmap``) and handed to the session
as its initializers (``SessionOptions.add_initializer``: ONNX Runtime uses the buffer in place), so
only the pages of tokens actually seen become resident, as clean file pages the kernel can drop.
Measured on e5 (one-thread question session): 71 -> 31 MB anonymous memory, the same vectors bit for
bit (docs/benchmarks.md, issue 26).

The model file is read with a minimal protobuf walker (field numbers from onnx.proto), so the
``onnx`` package stays a build-time dependency only.
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
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OP_TYPE = 1, 4
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


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _fields(buf: Any, start: int, end: int) -> Any:
    """(field number, wire type, value or (start, end) of a LEN payload) of one message's fields."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == _LEN:
            n, pos = _varint(buf, pos)
            yield number, wire, (pos, pos + n)
            pos += n
        elif wire == _I64:
            pos += 8
        elif wire == _I32:
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


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
            t.name = bytes(buf[value[0]:value[1]]).decode("utf-8")
        elif number == _TENSOR_RAW_DATA:
            t.offset, t.size = value[0], value[1] - value[0]
    return t


def lookup_tables(model: Path, min_bytes: int = MIN_BYTES) -> list[_Tensor]:
    """The initializers of ``model`` read only by ``Gather`` nodes (as the table, input 0), stored
    as raw data of at least ``min_bytes``; [] when the file is not what we can read."""
    try:
        with open(model, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _lookup_tables(buf, min_bytes)
    except (OSError, ValueError, IndexError):  # the session's own load says what is wrong with the file
        return []


def _lookup_tables(buf: Any, min_bytes: int) -> list[_Tensor]:
    tensors: list[_Tensor] = []
    other_use: set[str] = set()
    gathered: set[str] = set()
    for number, wire, value in _fields(buf, 0, len(buf)):
        if number != _MODEL_GRAPH or wire != _LEN:
            continue
        for g_number, g_wire, g_value in _fields(buf, *value):
            if g_wire != _LEN:
                continue
            if g_number == _GRAPH_INITIALIZER:
                tensors.append(_tensor(buf, *g_value))
            elif g_number == _GRAPH_NODE:
                op, inputs = "", []
                for n_number, n_wire, n_value in _fields(buf, *g_value):
                    if n_wire == _LEN and n_number in (_NODE_INPUT, _NODE_OP_TYPE):
                        text = bytes(buf[n_value[0]:n_value[1]]).decode("utf-8")
                        if n_number == _NODE_INPUT:
                            inputs.append(text)
                        else:
                            op = text
                for i, name in enumerate(inputs):
                    (gathered if op == "Gather" and i == 0 else other_use).add(name)
    out = []
    for t in tensors:
        dtype = _DTYPES.get(t.data_type)
        if (dtype is None or t.offset < 0 or t.size < min_bytes or t.name not in gathered or t.name in other_use
                or t.size != int(np.prod(t.dims, dtype=np.int64)) * np.dtype(dtype).itemsize):
            continue
        out.append(t)
    return out


class MappedTables:
    """A session's lookup tables mapped from its model file; must live as long as the session (ONNX
    Runtime reads the buffers in place and does not own them)."""

    def __init__(self, model: Path, options: Any, ort: Any) -> None:
        """Add ``model``'s lookup tables to session ``options`` as initializers read from the file."""
        self._maps: list[mmap.mmap] = []
        self._keep: list[Any] = []
        tables = lookup_tables(model)
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

    def __len__(self) -> int:
        return len(self._maps)
