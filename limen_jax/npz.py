"""Reading an ``.npz`` someone else wrote, with work bounded before any array is inflated.

An ``.npz`` is a zip of ``<name>.npy`` members, each a small header (shape, dtype, order)
and the raw data. :func:`headers` reads only the headers and the zip's directory: a member
whose dtype holds Python objects (a pickle), whose header and zip entry disagree on its size,
or an archive of too many members is refused there. The caller then checks shapes, dtypes
and the total size against what it expects, and :func:`read` inflates one member at a time,
never more bytes than its (checked) header says. Every refusal is :class:`NpzError`, one
line naming the file.
"""

from __future__ import annotations

import dataclasses
import math
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

MAX_MEMBERS = 10_000


class NpzError(ValueError):
    """An ``.npz`` that is refused; the message is one line naming the file."""


@dataclasses.dataclass(frozen=True)
class Header:
    """One member's header: shape, dtype, Fortran order, and its data's size in bytes."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize  # Python ints: a lying shape cannot overflow


def _open(path: Path) -> zipfile.ZipFile:
    if not path.is_file():
        raise NpzError(f"{path}: no such file (demonstrations are an .npz, as python -m limen_jax.demos writes them)")
    if not zipfile.is_zipfile(path):
        raise NpzError(f"{path}: not an .npz archive (demonstrations are an .npz, as python -m limen_jax.demos "
                       "writes them)")
    try:
        return zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise NpzError(f"{path}: unreadable .npz ({exc})") from None


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> Header:
    try:
        with zf.open(info) as fh:
            version = npy.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = npy.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = npy.read_array_header_2_0(fh)
            else:
                raise ValueError(f"npy format version {version}")
            offset = fh.tell()
    except (OSError, ValueError, SyntaxError, zipfile.BadZipFile, EOFError) as exc:
        raise NpzError(f"{path}: member {info.filename} is not a numpy array ({str(exc)[:200]})") from None
    except (RuntimeError, NotImplementedError) as exc:  # zipfile: an encrypted member, an unknown compression
        raise NpzError(f"{path}: member {info.filename} cannot be read ({str(exc)[:200]})") from None
    head = Header(tuple(int(n) for n in shape), np.dtype(dtype), bool(fortran))
    if head.dtype.hasobject:
        raise NpzError(f"{path}: array {info.filename[:-4]} holds Python objects (a pickle), which are never read")
    if info.file_size != offset + head.nbytes:
        raise NpzError(f"{path}: member {info.filename} is {info.file_size} bytes uncompressed but its header "
                       f"describes {offset + head.nbytes}: a damaged or crafted file")
    return head


def headers(path: str | Path) -> dict[str, Header]:
    """Every member's header by array name (``sim/0.npy`` is ``sim/0``); no data is read."""
    path = Path(path)
    with _open(path) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise NpzError(f"{path}: {len(infos)} members, more than the {MAX_MEMBERS} an .npz of this kind holds")
        out = {}
        for info in infos:
            if not info.filename.endswith(".npy"):
                raise NpzError(f"{path}: member {info.filename[:100]} is not a .npy array")
            out[info.filename[:-4]] = _header(zf, info, path)
        return out


def read(path: str | Path, name: str, header: Header) -> np.ndarray:
    """Member ``name``'s array, as :func:`headers` described it (at most its ``nbytes`` inflated)."""
    path = Path(path)
    try:
        with _open(path) as zf, zf.open(f"{name}.npy") as fh:
            array = npy.read_array(fh, allow_pickle=False)  # reads exactly the header's count of items
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, RuntimeError, NotImplementedError) as exc:
        raise NpzError(f"{path}: array {name} cannot be read ({str(exc)[:200]})") from None
    if array.shape != header.shape or array.dtype != header.dtype:
        raise NpzError(f"{path}: array {name} changed while it was read")
    return array
