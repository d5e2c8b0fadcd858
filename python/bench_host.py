"""Host cost of one sampling call from Python, on a GPU with torch.

  FLASHSAMPLING_LIB=build/libflashsampling.so \
  python3 python/bench_host.py [--model-shape D,V] [--batch B] [--calls N]

(FLASHSAMPLING_LIB may be left out where the library is installed.)

Prints a table of host microseconds per call (the time Python spends issuing
N calls back to back, divided by N; the GPU runs behind and is synchronised
outside the timed loop), for:
  sample_torch     the whole wrapper: argument checks, structs, the output
                   tensor, the stream lookup, Context.sample;
  ... out=         the same into a kept output tensor (no allocation);
  Context.sample   ctypes alone, the structs and outputs built once;
  graph replay     one torch.cuda.CUDAGraph holding one sample_torch call;
and the GPU's microseconds per call (CUDA events around N calls) beside
them.  The library's own host cost (fs_sample from C) is fs-bench's
"host" line (docs/benchmarks.md)."""
import argparse
import time

import torch

import flashsampling as fs


def host_us(fn, calls):
    """Host microseconds per call of fn over `calls` calls, and GPU
    microseconds per call (events around the same calls)."""
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    stop.record()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / calls, start.elapsed_time(stop) * 1e3 / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-shape", default="4096,151936", help="D,V (default Qwen3-8B's)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calls", type=int, default=200,
                    help="calls per timing (default 200: fewer than the launch queue holds)")
    a = ap.parse_args()
    D, V = (int(x) for x in a.model_shape.split(","))
    if a.calls < 1 or a.batch < 1 or D < 1 or V < 1:
        ap.error(f"--batch {a.batch}, --calls {a.calls}, --model-shape {a.model_shape}: "
                 "each must be positive")
    dev = torch.device("cuda", 0)
    hidden = torch.randn(a.batch, D, device=dev).to(torch.bfloat16)
    weight = (torch.randn(V, D, device=dev) * 0.02).to(torch.bfloat16)
    with fs.Context(0) as ctx:
        def wrapper():
            return fs.sample_torch(ctx, hidden, weight, temperature=1.0, seed=1)

        kept = torch.empty((a.batch, 1), dtype=torch.int32, device=dev)

        def wrapper_out():
            return fs.sample_torch(ctx, hidden, weight, temperature=1.0, seed=1, out=kept)

        p = fs.Problem(a.batch, D, V, 0, fs.DTYPE_BF16, hidden.data_ptr(), D,
                       weight.data_ptr(), D)
        s = fs.Sampling(1.0, None, 1, 1, None, 0, None)
        tokens = torch.empty((a.batch, 1), dtype=torch.int32, device=dev)
        o = fs.Outputs(tokens.data_ptr(), None, None)
        stream = torch.cuda.current_stream(dev).cuda_stream

        def direct():
            ctx.sample(p, s, o, stream)

        wrapper()  # prepares the shape before the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            wrapper()
        rows = [("sample_torch", host_us(wrapper, a.calls)),
                ("... out=", host_us(wrapper_out, a.calls)),
                ("Context.sample", host_us(direct, a.calls)),
                ("graph replay", host_us(graph.replay, a.calls))]
    print(f"{torch.cuda.get_device_name(dev)}, bf16 B={a.batch} D={D} V={V}, "
          f"{a.calls} calls back to back, torch {torch.__version__}")
    print(f"{'path':<16} {'host us/call':>13} {'GPU us/call':>12}")
    for name, (h, g) in rows:
        print(f"{name:<16} {h:>13.1f} {g:>12.1f}")


if __name__ == "__main__":
    main()
