"""Device workspaces of the GPU calls.

The CUDA codec needs a small device workspace per call that is zero-filled before its first use and that each call
leaves ready for the next one on the same stream. So this module keeps one per (framework, device, stream), made
zero-filled on first use and replaced by a larger zero-filled one when a call needs more; calls never allocate or
clear it otherwise. Encoder and decoder share it: calls on one stream run one after the other.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

_cache: Dict[Tuple[str, int, int], Any] = {}


def get(framework: str, device_index: int, stream: int, nbytes: int, zeros: Callable[[int], Any]) -> Any:
    """The workspace of (framework, device, stream), at least nbytes; zeros(n) makes a zero-filled uint8 array."""
    key = (framework, int(device_index), int(stream))
    ws = _cache.get(key)
    if ws is None or ws.nbytes < nbytes:
        ws = zeros(max(int(nbytes), 256))
        _cache[key] = ws
    return ws
