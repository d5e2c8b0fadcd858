#!/usr/bin/env python3
"""mm_power.py B ITERS: cuBLAS's matmul alone (torch.matmul, bf16, [B, 4096] x
[4096, 151936], the Qwen3-8B LM head) back to back for ITERS calls, then a burst of
20 after 3 s idle; prints microseconds per call (CUDA events).  Run beside
`nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm --format=csv -lms 200`
to see its power and clock against fs-demo's (docs/benchmarks.md, "Power").
Needs torch with CUDA (the H200 machine has it; the build does not use it)."""
import sys, time, torch
B = int(sys.argv[1]); iters = int(sys.argv[2])
D, V = 4096, 151936
h = torch.randn(B, D, device="cuda", dtype=torch.bfloat16)
w = torch.randn(V, D, device="cuda", dtype=torch.bfloat16)
out = torch.empty(B, V, device="cuda", dtype=torch.bfloat16)
for _ in range(20): torch.matmul(h, w.t(), out=out)
torch.cuda.synchronize()
s = time.strftime("%H:%M:%S")
e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
e0.record()
for _ in range(iters): torch.matmul(h, w.t(), out=out)
e1.record(); torch.cuda.synchronize()
print(f"mm B={B} iters={iters} start={s} end={time.strftime('%H:%M:%S')} | {e0.elapsed_time(e1)*1000/iters:.1f} us per call")
# a burst after idle
time.sleep(3)
e0.record()
for _ in range(20): torch.matmul(h, w.t(), out=out)
e1.record(); torch.cuda.synchronize()
print(f"mm B={B} burst of 20 after 3 s idle | {e0.elapsed_time(e1)*1000/20:.1f} us per call")
