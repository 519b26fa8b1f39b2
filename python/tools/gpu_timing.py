"""Throughput of splitzip.compress / decompress on torch CUDA tensors (the Python API, the frame-size wait
included) against torch's own device-to-device copy of the same bytes, measured in the same run.
Data: the real BF16 KV slice (data/kv_code_bf16_slice.bin) tiled to 1 GiB."""

import pathlib
import time

import numpy as np
import torch

import splitzip

REPO = pathlib.Path(__file__).resolve().parents[2]
raw = np.fromfile(REPO / "data" / "kv_code_bf16_slice.bin", dtype=np.int16)
reps = (1 << 29) // raw.size  # 2^29 values = 1 GiB of bf16
x = torch.from_numpy(raw).cuda().repeat(reps).view(torch.bfloat16)
nbytes = x.numel() * 2


def timed(fn, iters=10):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


t_copy = timed(lambda: x.clone())
frame = splitzip.compress(x)
out = torch.empty_like(x)
t_c = timed(lambda: splitzip.compress(x))
t_d = timed(lambda: splitzip.decompress(frame, out=out))
t_d_nosync = timed(lambda: splitzip.decompress(frame, out=out, status=torch.empty(1, dtype=torch.int32,
                                                                                   device="cuda")))
assert torch.equal(out.view(torch.int16), x.view(torch.int16))
ratio = nbytes / frame.numel()
print(f"{nbytes / 2**30:.2f} GiB bf16, ratio {ratio:.4f}; median of 10, wall clock incl. Python")
print(f"torch clone (read+write) {nbytes / t_copy / 1e9:8.1f} GB/s of input")
print(f"splitzip.compress        {nbytes / t_c / 1e9:8.1f} GB/s of input  ({t_c / t_copy:.2f}x the clone's time)")
print(f"splitzip.decompress      {nbytes / t_d / 1e9:8.1f} GB/s of output ({t_d / t_copy:.2f}x)")
print(f"decompress, status=      {nbytes / t_d_nosync / 1e9:8.1f} GB/s of output ({t_d_nosync / t_copy:.2f}x)")
