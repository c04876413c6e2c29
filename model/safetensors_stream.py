"""Write a safetensors file tensor by tensor, hashing the bytes as they go out.

`safetensors.torch.save_file` needs every tensor in memory at once and builds the whole file as
one buffer first. Here the header is computed from the tensors' names, dtypes and shapes alone
(the format's JSON header lists each tensor's byte range), then each tensor is asked for only
when its turn comes and written in chunks, so a writer holds one tensor at a time, and the
sha256 of the file is known when the last byte is written (nothing is read back to hash it).
The files load with `safetensors` as usual.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import torch

DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
CHUNK = 8 << 20  # bytes per write and hash update


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """One tensor of a file to write: its name, dtype, shape, and how to get its values."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    values: Callable[[], torch.Tensor]
    """Called once, when the tensor is written; the result may be dropped right after."""

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * torch.empty((), dtype=self.dtype).element_size()


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """What a writer reports about the file it wrote."""

    bytes: int
    sha256: str


def spec_of(name: str, tensor: torch.Tensor) -> TensorSpec:
    """A spec for a tensor already in memory."""
    return TensorSpec(name, tensor.dtype, tuple(tensor.shape), lambda: tensor)


def write_safetensors(
    out: BinaryIO, specs: Sequence[TensorSpec], metadata: dict[str, str] | None = None
) -> WrittenFile:
    """Write `specs` in order as one safetensors file to the binary stream `out`."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"tensor names repeat in {names}")
    digest = hashlib.sha256()
    written = _put(out, digest, encode_header(specs, metadata))
    for spec in specs:
        tensor = spec.values()
        if tensor.dtype != spec.dtype or tuple(tensor.shape) != spec.shape:
            raise ValueError(
                f"tensor {spec.name} is {tensor.dtype} {tuple(tensor.shape)}, "
                f"its spec says {spec.dtype} {spec.shape}"
            )
        written += _put_tensor(out, digest, tensor)
    return WrittenFile(bytes=written, sha256=digest.hexdigest())


def encode_header(
    specs: Sequence[TensorSpec], metadata: dict[str, str] | None = None, *, align: int = 8
) -> bytes:
    """The bytes before a file's tensor data: the header's length (u64, little-endian) and
    the JSON header, padded with spaces (as the format allows) so the data starts at a
    multiple of `align` bytes (a multiple of 8)."""
    entries: dict[str, object] = {}
    if metadata:
        entries["__metadata__"] = dict(metadata)
    offset = 0
    for spec in specs:
        if spec.dtype not in DTYPES:
            raise ValueError(f"tensor {spec.name}: dtype {spec.dtype} has no safetensors code")
        entries[spec.name] = {
            "dtype": DTYPES[spec.dtype],
            "shape": list(spec.shape),
            "data_offsets": [offset, offset + spec.nbytes],
        }
        offset += spec.nbytes
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-(len(text) + 8) % align)
    return struct.pack("<Q", len(text)) + text


def _put_tensor(out: BinaryIO, digest, tensor: torch.Tensor) -> int:
    flat = tensor.detach().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    data = memoryview(flat.contiguous().view(torch.uint8).numpy())
    written = 0
    for start in range(0, len(data), CHUNK):
        written += _put(out, digest, data[start : start + CHUNK])
    return written


def _put(out: BinaryIO, digest, data) -> int:
    digest.update(data)
    out.write(data)
    return len(data)
