"""The bytes between the engine and a checker worker: JSON plus raw buffers, nothing else.

A frame is ``b"LMN1"``, a little-endian u64 length and a UTF-8 JSON object, then as many
(u64 length, bytes) buffers as the JSON's ``"buffers"`` count says. Arrays travel as raw
buffers described by dtype and shape in the JSON. No pickle in either direction: the
engine only ever parses JSON, numbers and StableHLO bytes from a worker.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

MAGIC = b"LMN1"
_U64 = struct.Struct("<Q")


class WireError(ValueError):
    """A malformed frame (truncated, oversized, or not JSON)."""


def encode(header: dict[str, Any], buffers: list[bytes]) -> bytes:
    """One frame holding ``header`` (JSON-ready) and ``buffers``."""
    head = json.dumps({**header, "buffers": len(buffers)}).encode()
    parts = [MAGIC, _U64.pack(len(head)), head]
    for buf in buffers:
        parts += [_U64.pack(len(buf)), bytes(buf)]
    return b"".join(parts)


def decode(data: bytes, max_bytes: int = 1 << 30) -> tuple[dict[str, Any], list[bytes]]:
    """Inverse of :func:`encode`; WireError on anything malformed or over ``max_bytes``."""
    if len(data) > max_bytes:
        raise WireError(f"frame of {len(data)} bytes exceeds {max_bytes}")
    if data[:4] != MAGIC:
        raise WireError("not a frame")
    pos = 4
    header_bytes, pos = _chunk(data, pos)
    try:
        header = json.loads(header_bytes.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"header is not JSON ({exc})") from None
    if not isinstance(header, dict) or not isinstance(header.get("buffers"), int):
        raise WireError("header is not a JSON object with a buffer count")
    buffers = []
    for _ in range(header["buffers"]):
        buf, pos = _chunk(data, pos)
        buffers.append(buf)
    if pos != len(data):
        raise WireError("trailing bytes after the frame")
    return header, buffers


def _chunk(data: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 8 > len(data):
        raise WireError("truncated frame")
    (size,) = _U64.unpack_from(data, pos)
    end = pos + 8 + size
    if end > len(data):
        raise WireError("truncated frame")
    return data[pos + 8 : end], end


def array_spec(array: np.ndarray) -> dict[str, Any]:
    """How to rebuild ``array`` from its raw bytes."""
    return {"dtype": array.dtype.str, "shape": list(array.shape)}


def array_from(spec: dict[str, Any], buf: bytes) -> np.ndarray:
    """The array ``spec`` describes, from ``buf`` (numeric dtypes only; a copy)."""
    dtype = np.dtype(spec["dtype"])
    if dtype.hasobject or dtype.fields is not None:
        raise WireError(f"refused dtype {dtype}")
    shape = tuple(int(d) for d in spec["shape"])
    array = np.frombuffer(buf, dtype=dtype)
    if array.size != int(np.prod(shape)):
        raise WireError("array size does not match its shape")
    return array.reshape(shape).copy()
