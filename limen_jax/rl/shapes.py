"""The shapes a batch compiles at: its padded observation width and how its K x S slots
lie over the devices."""

from __future__ import annotations


def bucket_width(dim: int) -> int:
    """The padded observation width for a widest obs_dim of ``dim``: 64, then multiples
    of 32 up to 256 and of 64 up to 512 (beyond, multiples of 128: only task defaults are
    wider than programs may be, and a task's default has one fixed size), so that every
    batch of programs (1-512 features) falls in one of eleven shapes and a search compiles
    the program-independent part at most eleven times. The steps grow with the width
    because padding costs little at small widths and more at large ones (docs/concepts/trainer.md)."""
    dim = max(int(dim), 1)
    if dim > 512:
        return -(-dim // 128) * 128
    if dim > 256:
        return -(-dim // 64) * 64
    return max(64, -(-dim // 32) * 32)


def layout(num_candidates: int, num_seeds: int, num_devices: int) -> tuple[int, int] | None:
    """How K x S slots shard over D devices: (devices along K, devices along S), their
    product D, chosen for the fewest slots per device once K and S are padded to
    multiples (ties: more along S, which needs no switch between programs); None when
    sharding would not lower the slots per device (one device, or K = S = 1)."""
    K, S, D = int(num_candidates), int(num_seeds), int(num_devices)
    best, cost = None, K * S
    for ds in sorted((d for d in range(1, D + 1) if D % d == 0), reverse=True):
        dk = D // ds
        c = -(-K // dk) * -(-S // ds)
        if c < cost:
            best, cost = (dk, ds), c
    return best
