"""Atoll's data layout and digest, in Python: for checking exports and for baselines.

held_out_windows() gives the held-out batches every Atoll worker evaluates on
(training/token_data.cpp): the last 10% of the tokens, `eval_batches * batch` windows of
context + 1 tokens at evenly spaced starts. digest64() is runtime/core/digest.cpp's hash, the
one `atollctl fragments` and `atoll export --json` print.
"""
import torch

M64 = (1 << 64) - 1
PRIME1, PRIME2 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F


def _mix(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def digest64(data: bytes) -> int:
    size = len(data)
    lanes = [PRIME1, PRIME2, PRIME1 ^ PRIME2, ~PRIME1 & M64]
    whole = size // 32 * 32
    words = memoryview(data)[:whole].cast("Q")  # little-endian machines, as Atoll's
    for i in range(0, len(words), 4):
        for k in range(4):
            lanes[k] = ((lanes[k] ^ words[i + k]) * PRIME1 + PRIME2) & M64
    h = (size * PRIME2) & M64
    for k in range(4):
        h = (_mix(h ^ lanes[k]) * PRIME1) & M64
    i = whole
    while i + 8 <= size:
        h = (_mix(h ^ int.from_bytes(data[i:i + 8], "little")) * PRIME1) & M64
        i += 8
    tail = int.from_bytes(data[i:], "little") if i < size else 0
    return _mix(h ^ tail ^ PRIME2)


def held_out_windows(tokens: torch.Tensor, context: int, batch: int, eval_batches: int):
    """Yields (inputs, targets) of each held-out batch; `tokens` is the whole file as int64."""
    held = tokens[len(tokens) * 9 // 10:]
    window = context + 1
    room = len(held) - window
    stride = max(1, room // (batch * eval_batches))
    for b in range(eval_batches):
        rows = [held[((b * batch + i) * stride) % room:][:window] for i in range(batch)]
        w = torch.stack(rows)
        yield w[:, :-1], w[:, 1:]
