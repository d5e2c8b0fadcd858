"""gpu/python: sample_torch on a GPU against the CPU reference.  Skips (exit
77, with the reason) without torch or a CUDA device; fails if the library
does not load.  Checked, bf16 and fp16, B = 5, D = 256, V = 3000 at a
vocab_offset of 64:
  1. sampled rows (T = 0.8, scalar seed) and greedy rows (T = 0) equal
     reference_sample's tokens, and their logits agree within 1e-3;
  2. per-row temperatures, seeds and offsets (CUDA tensors) give the
     reference's draw with the same host arrays;
  3. a token mask allowing only the even ids draws only even ids, equal to
     the reference with the same mask;
  4. two calls with one seed agree; the call is on torch's current stream
     (a side stream gives the same tokens after it is synchronised);
  5. a call captured in a CUDA graph (torch.cuda.graph, after a call that
     prepared the shape) draws, at each replay, what a direct call draws
     with the per-row offsets tensor's contents at that replay, and the
     draws of the three offsets used are not all equal (so the replays read
     the tensor rather than a captured copy);
  6. out= and logits_out= buffers receive what a call without them returns,
     are the tensors returned, and a buffer of the wrong dtype or size raises
     FlashSamplingError naming it;
  7. logprobs_out= receives each draw's logit minus the log-sum-exp of the
     row's raw logits (torch's, in float64 from the same bf16 / fp16 values),
     within 1e-4; one of the wrong size raises FlashSamplingError naming it;
  8. logit_bias_tokens= and logit_bias_values= (int32 / float32 CUDA tensors
     [B, 4], a pad and a repeat among them) give the reference's draw with
     the same host arrays, sampled and greedy, its logits raw; +1000 on one
     id a row makes it every greedy row's token (the logits here have sd ~4:
     +20 was not always enough in fp16); only one of the two tensors
     raises FlashSamplingError naming them;
  9. the filters (min_p=, top_k=, top_p= and the per-row min_ps=, top_ks=,
     top_ps=, float32 / int32 / float32 CUDA tensors of B entries, with rows
     whose values keep all: 0, NaN, <= 0 or >= 1) give the reference's draw
     with the same scalars and host arrays, sampled and greedy, their logits
     raw; every token a top_k = 40 call draws is among its row's 40 largest
     logits (torch's, in float64), and top_k = 1 draws the greedy tokens; a
     call captured in a CUDA graph (after a filtered call) draws, at each
     replay, what a direct call draws with the per-row top_ks tensor's
     contents then (1: the greedy tokens); a filter tensor of the wrong dtype,
     size or device and a bad scalar raise FlashSamplingError naming it.
 10. top_logprob_tokens_out= and top_logprob_values_out= (int32 / float32
     [B, 20]) hold torch.topk's ids of the float64 logits, in order, and
     their log-softmax within 1e-4; only one of the two raises
     FlashSamplingError naming both.
 11. ranks_out= (int32 [B, 2], two samples) holds, for each draw, the count
     of torch's logits (float64, rounded to float32) >= its logit, off by
     one at most; a ranks_out of the wrong size raises FlashSamplingError
     naming it.
 11b. target_tokens= (int32 [B], row 0's -1; since 0.3.18) gives
     target_logprobs_out= torch's log-softmax of the float64 logits at each
     row's id within 1e-4 and target_ranks_out= the count of its logits >=
     the target's, off by one at most; NaN and 0 for row 0.
 12. nccl_comm= (Context.sample_nccl; the library's call since 0.2) with NCCL's
     communicator of one rank (libnccl.so.2 through ctypes; skipped, saying
     so, without it): a sampled call with the even-ids mask (the whole
     vocabulary's words) draws the unsharded call's tokens and logits, bit
     for bit, its logprobs within 1e-4, and (since 0.3.14) its ranks_out=
     exactly.
Near-ties of fp32 logits could differ from the reference's double logits;
with these random inputs none is within the tolerance (the test says so if
one is).  So could a row whose top-p or min-p boundary lies within fp32
rounding of p (flashsampling.h: one token more or fewer); none does here."""
import ctypes
import sys

try:
    import torch
except ImportError:
    print("SKIPPED: gpu/python needs torch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIPPED: gpu/python needs a CUDA device (torch.cuda.is_available() is False)")
    sys.exit(77)

import flashsampling as fs  # noqa: E402


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def host(t, ctype):
    """A host ctypes array with the contents of tensor t."""
    flat = t.detach().cpu().contiguous().view(-1)
    n = flat.numel() * flat.element_size() // ctypes.sizeof(ctype)
    a = (ctype * n)()
    ctypes.memmove(a, flat.data_ptr(), ctypes.sizeof(a))
    return a


def reference(hidden, weight, off, T, seed, S, temps=None, seeds=None, offs=None, mask=None,
              bias=None, filters=None):
    B, D = hidden.shape
    V = weight.shape[0]
    bits = torch.int16
    H = host(hidden.view(bits), ctypes.c_uint16)
    W = host(weight.view(bits), ctypes.c_uint16)
    dt = fs.DTYPE_BF16 if hidden.dtype == torch.bfloat16 else fs.DTYPE_FP16
    p = fs.Problem(B, D, V, off, dt, ctypes.addressof(H), D, ctypes.addressof(W), D)
    keep = []

    def arr(t, ctype):
        if t is None:
            return None
        a = host(t, ctype)
        keep.append(a)
        return ctypes.addressof(a)

    s = fs.Sampling(T, arr(temps, ctypes.c_float), S, seed, arr(seeds, ctypes.c_uint64), 0,
                    arr(offs, ctypes.c_uint64))
    opt = fs.Options(arr(mask, ctypes.c_uint32), mask.stride(0)) if mask is not None else None
    if bias is not None:
        opt = fs.Options(logit_bias_tokens=arr(bias[0], ctypes.c_int32),
                         logit_bias_values=arr(bias[1], ctypes.c_float),
                         logit_bias_count=bias[0].shape[1])
    if filters is not None:  # sample_torch's keywords; per-row values as host tensors
        f = dict(filters)
        opt = fs.Options(min_p=f.get("min_p", 0.0), min_ps=arr(f.get("min_ps"), ctypes.c_float),
                         top_k=f.get("top_k", 0), top_ks=arr(f.get("top_ks"), ctypes.c_int32),
                         top_p=f.get("top_p", 0.0), top_ps=arr(f.get("top_ps"), ctypes.c_float))
    tokens = (ctypes.c_int32 * (B * S))()
    logits = (ctypes.c_float * (B * S))()
    fs.reference_sample(p, s, tokens, logits, options=opt)
    return list(tokens), list(logits)


def compare(what, got, ref):
    tok, lg = got
    rtok, rlg = ref
    tok, lg = tok.view(-1).tolist(), lg.view(-1).tolist()
    if tok != rtok:
        fail(f"{what}: tokens {tok} against the reference's {rtok}")
    worst = max(abs(a - b) for a, b in zip(lg, rlg))
    if worst > 1e-3:
        fail(f"{what}: logits differ by {worst}")
    print(f"ok {what}: {tok[:8]}... (logits within {worst:.2g})")


def nccl_one_rank():
    """(libnccl, a communicator of one rank on the current device, None), or
    (None, None, why not)."""
    try:
        lib = ctypes.CDLL("libnccl.so.2")
    except OSError as e:
        return None, None, f"no libnccl.so.2 ({e})"

    class UniqueId(ctypes.Structure):  # ncclUniqueId: NCCL_UNIQUE_ID_BYTES = 128
        _fields_ = [("internal", ctypes.c_char * 128)]
    uid, comm = UniqueId(), ctypes.c_void_p()
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId,
                                     ctypes.c_int]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    if lib.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        return None, None, "ncclGetUniqueId failed"
    if lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) != 0:
        return None, None, "ncclCommInitRank of one rank failed"
    return lib, comm, None


def main():
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    nccl, comm, why = nccl_one_rank()
    g = torch.Generator().manual_seed(11)
    B, D, V, off, S = 5, 256, 3000, 64, 3
    with fs.Context(0) as ctx:
        for dtype in (torch.bfloat16, torch.float16):
            name = str(dtype).split(".")[1]
            hidden = (torch.randn(B, D, generator=g) * 0.5).to(dtype).to(dev)
            weight = (torch.randn(V, D, generator=g) * 0.5).to(dtype).to(dev)
            for T in (0.8, 0.0):
                got = fs.sample_torch(ctx, hidden, weight, temperature=T, seed=123,
                                      num_samples=S, vocab_offset=off, return_logits=True)
                compare(f"1 {name} T={T}", got, reference(hidden, weight, off, T, 123, S))
            temps = torch.tensor([0.5, 0.0, 1.0, 2.0, 0.7], dtype=torch.float32)
            seeds = torch.tensor([1, 2, 3, 2**62, 5], dtype=torch.int64)
            offs = torch.tensor([0, 9, 0, 1, 100], dtype=torch.int64)
            got = fs.sample_torch(ctx, hidden, weight, num_samples=S, vocab_offset=off,
                                  temperatures=temps.to(dev), seeds=seeds.to(dev),
                                  offsets=offs.to(dev), return_logits=True)
            compare(f"2 {name} per-row", got,
                    reference(hidden, weight, off, 1.0, 0, S, temps, seeds, offs))
            words = (off + V + 31) // 32
            mask = torch.full((B, words), 0x55555555, dtype=torch.int32)  # even ids
            got = fs.sample_torch(ctx, hidden, weight, temperature=1.0, seed=9, num_samples=S,
                                  vocab_offset=off, token_mask=mask.to(dev), return_logits=True)
            if any(t % 2 for t in got[0].view(-1).tolist()):
                fail(f"3 {name} mask: odd ids drawn: {got[0].view(-1).tolist()}")
            compare(f"3 {name} mask", got,
                    reference(hidden, weight, off, 1.0, 9, S, mask=mask.view(torch.int32)))
            a = fs.sample_torch(ctx, hidden, weight, seed=77, vocab_offset=off)
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                b = fs.sample_torch(ctx, hidden, weight, seed=77, vocab_offset=off)
            side.synchronize()
            if not torch.equal(a, b):
                fail(f"4 {name}: one seed, two calls: {a.view(-1).tolist()} / {b.view(-1).tolist()}")
            print(f"ok 4 {name}: one seed, the current and a side stream agree")
            offs_g = torch.zeros(B, dtype=torch.int64, device=dev)

            def call():
                return fs.sample_torch(ctx, hidden, weight, temperature=2.0, seed=5,
                                       offsets=offs_g, vocab_offset=off)
            call()  # prepares the shape: a capture may only enqueue kernels
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = call()
            draws = []
            for step in (0, 1, 2):
                offs_g.fill_(1000 * step)
                graph.replay()
                direct = call()
                if not torch.equal(captured, direct):
                    fail(f"5 {name} graph: replay at offset {1000 * step} drew "
                         f"{captured.view(-1).tolist()}, a direct call {direct.view(-1).tolist()}")
                draws.append(captured.view(-1).tolist())
            if draws[0] == draws[1] == draws[2]:
                fail(f"5 {name} graph: three offsets drew the same tokens {draws[0]}")
            print(f"ok 5 {name}: graph replays equal direct calls at three offsets")
            want = fs.sample_torch(ctx, hidden, weight, seed=8, num_samples=S, vocab_offset=off,
                                   return_logits=True)
            out = torch.full((B, S), -1, dtype=torch.int32, device=dev)
            lout = torch.zeros((B * S,), dtype=torch.float32, device=dev)
            got = fs.sample_torch(ctx, hidden, weight, seed=8, num_samples=S, vocab_offset=off,
                                  out=out, logits_out=lout)
            if got[0] is not out or got[1] is not lout:
                fail(f"6 {name}: out= and logits_out= are not the tensors returned")
            if not torch.equal(out, want[0]) or not torch.equal(lout.view(B, S), want[1]):
                fail(f"6 {name}: out= {out.view(-1).tolist()} against {want[0].view(-1).tolist()}")
            for kw, bad in (("out", torch.empty((B, S), dtype=torch.int64, device=dev)),
                            ("logits_out", torch.empty((B,), dtype=torch.float32, device=dev))):
                try:
                    fs.sample_torch(ctx, hidden, weight, num_samples=S, **{kw: bad})
                    fail(f"6 {name}: a bad {kw} was accepted")
                except fs.FlashSamplingError as e:
                    if kw not in str(e):
                        fail(f"6 {name}: the error for a bad {kw} does not name it: {e}")
            print(f"ok 6 {name}: out= and logits_out= filled and returned; bad ones rejected")
            lp = torch.empty((B, S), dtype=torch.float32, device=dev)
            tok, lg = fs.sample_torch(ctx, hidden, weight, seed=3, num_samples=S,
                                      vocab_offset=off, return_logits=True, logprobs_out=lp)
            lse = torch.logsumexp(hidden.double() @ weight.double().T, dim=1, keepdim=True)
            err = (lp.double() - (lg.double() - lse)).abs().max().item()
            if not err <= 1e-4:
                fail(f"7 {name} logprobs: off by {err}")
            try:
                fs.sample_torch(ctx, hidden, weight, num_samples=S,
                                logprobs_out=torch.empty((B,), dtype=torch.float32, device=dev))
                fail(f"7 {name}: a logprobs_out of B elements was accepted (B x S needed)")
            except fs.FlashSamplingError as e:
                if "logprobs_out" not in str(e):
                    fail(f"7 {name}: the error for a bad logprobs_out does not name it: {e}")
            print(f"ok 7 {name}: logprobs within {err:.2g} of torch's log-softmax")
            bt = torch.tensor([[off + 7 * b + 1, -1, off + 100 + b, off + 7 * b + 1]
                               for b in range(B)], dtype=torch.int32)
            bv = torch.tensor([[3.0, 9.0, -2.0, 2.5] for _ in range(B)], dtype=torch.float32)
            for T in (0.8, 0.0):
                got = fs.sample_torch(ctx, hidden, weight, temperature=T, seed=21, num_samples=S,
                                      vocab_offset=off, return_logits=True,
                                      logit_bias_tokens=bt.to(dev), logit_bias_values=bv.to(dev))
                compare(f"8 {name} bias T={T}", got,
                        reference(hidden, weight, off, T, 21, S, bias=(bt, bv)))
            big = torch.tensor([[off + 11 * b + 5] for b in range(B)], dtype=torch.int32)
            tok = fs.sample_torch(ctx, hidden, weight, temperature=0.0, vocab_offset=off,
                                  logit_bias_tokens=big.to(dev),
                                  logit_bias_values=torch.full((B, 1), 1000.0, device=dev))
            if tok.view(-1).tolist() != big.view(-1).tolist():
                fail(f"8 {name}: +1000 on one id a row: greedy tokens {tok.view(-1).tolist()}")
            try:
                fs.sample_torch(ctx, hidden, weight, logit_bias_tokens=big.to(dev))
                fail(f"8 {name}: logit_bias_tokens without logit_bias_values was accepted")
            except fs.FlashSamplingError as e:
                if "logit_bias_values" not in str(e):
                    fail(f"8 {name}: the error for a lone logit_bias_tokens does not name it: {e}")
            print(f"ok 8 {name}: a logit bias as the reference draws it")
            per_row = dict(top_ks=torch.tensor([0, 1, 20, 3000, -5], dtype=torch.int32),
                           top_ps=torch.tensor([1.0, 0.5, 0.95, float("nan"), 0.0]),
                           min_ps=torch.tensor([0.0, 0.1, 0.0, 0.5, float("nan")]))
            cases = (dict(top_k=40), dict(top_p=0.9), dict(min_p=0.05),
                     dict(min_p=0.02, top_k=100, top_p=0.8), per_row)
            for filt in cases:
                on_dev = {k: v.to(dev) if torch.is_tensor(v) else v for k, v in filt.items()}
                what = ",".join(sorted(filt))
                for T in (0.8, 0.0):
                    got = fs.sample_torch(ctx, hidden, weight, temperature=T, seed=31,
                                          num_samples=S, vocab_offset=off, return_logits=True,
                                          **on_dev)
                    compare(f"9 {name} {what} T={T}", got,
                            reference(hidden, weight, off, T, 31, S, filters=filt))
            z = hidden.double() @ weight.double().T  # [B, V] raw logits
            kth = z.topk(40, dim=1).values[:, -1:]
            tok = fs.sample_torch(ctx, hidden, weight, temperature=1.0, seed=4, num_samples=64,
                                  vocab_offset=off, top_k=40).long() - off
            if not bool((z.gather(1, tok) >= kth - 1e-3).all()):
                fail(f"9 {name}: top_k=40 drew a token below its row's 40th largest logit")
            greedy = fs.sample_torch(ctx, hidden, weight, temperature=0.0, vocab_offset=off)
            tok = fs.sample_torch(ctx, hidden, weight, temperature=1.0, seed=4, num_samples=S,
                                  vocab_offset=off, top_k=1)
            if not torch.equal(tok, greedy.expand(B, S)):
                fail(f"9 {name}: top_k=1 drew {tok.view(-1).tolist()}, greedy "
                     f"{greedy.view(-1).tolist()}")
            ks_g = torch.zeros(B, dtype=torch.int32, device=dev)

            def fcall():
                return fs.sample_torch(ctx, hidden, weight, temperature=1.0, seed=6,
                                       top_ks=ks_g, vocab_offset=off)
            fcall()  # compiles the filter kernel, grows the workspace: not while capturing
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = fcall()
            for k in (1, 0, 5):
                ks_g.fill_(k)
                graph.replay()
                direct = fcall()
                if not torch.equal(captured, direct) or \
                        (k == 1 and not torch.equal(direct, greedy)):
                    fail(f"9 {name} graph: replay at top_ks={k} drew "
                         f"{captured.view(-1).tolist()}, a direct call "
                         f"{direct.view(-1).tolist()}, greedy "
                         f"{greedy.view(-1).tolist()}")
            for kw, bad in (("top_ks", torch.ones(B, dtype=torch.int64, device=dev)),
                            ("min_ps", torch.zeros(B - 1, dtype=torch.float32, device=dev)),
                            ("top_ps", torch.ones(B, dtype=torch.float32)),
                            ("top_k", -1), ("top_p", 1.5), ("min_p", float("nan"))):
                try:
                    fs.sample_torch(ctx, hidden, weight, vocab_offset=off, **{kw: bad})
                    fail(f"9 {name}: a bad {kw} was accepted")
                except fs.FlashSamplingError as e:
                    if kw not in str(e):
                        fail(f"9 {name}: the error for a bad {kw} does not name it: {e}")
            print(f"ok 9 {name}: filters as the reference draws them; top_k within the top k; "
                  "graph replays read top_ks; bad ones rejected")
            # 10. top logprobs (since 0.3.12) against torch's float64 logits
            n = 20
            tt = torch.empty((B, n), dtype=torch.int32, device=dev)
            tv = torch.empty((B, n), dtype=torch.float32, device=dev)
            fs.sample_torch(ctx, hidden, weight, seed=3, vocab_offset=off,
                            top_logprob_tokens_out=tt, top_logprob_values_out=tv)
            z = hidden.double() @ weight.double().T
            want = torch.log_softmax(z, dim=1)
            top = torch.topk(z, n, dim=1)
            if not torch.equal(tt.long().cpu(), (top.indices + off).cpu()):
                fail(f"10 {name}: top logprob ids {tt[0].tolist()}, torch's "
                     f"{(top.indices[0] + off).tolist()}")
            err = (tv.double() - want.gather(1, (tt.long() - off))).abs().max().item()
            if not err <= 1e-4:
                fail(f"10 {name}: top logprob values off by {err}")
            try:
                fs.sample_torch(ctx, hidden, weight, top_logprob_tokens_out=tt)
                fail(f"10 {name}: top_logprob_tokens_out alone was accepted")
            except fs.FlashSamplingError as e:
                if "top_logprob_values_out" not in str(e):
                    fail(f"10 {name}: the error for a lone tokens tensor does not name both: {e}")
            print(f"ok 10 {name}: top logprobs are torch's topk and log-softmax within {err:.2g}")
            # 11. ranks (since 0.3.13): the count of torch's logits, rounded to
            # float32, >= each draw's logit (off by one at most where a logit
            # lies within fp32 rounding of the dot products)
            rk = torch.empty((B, 2), dtype=torch.int32, device=dev)
            tk, lgt = fs.sample_torch(ctx, hidden, weight, seed=5, num_samples=2,
                                      vocab_offset=off, return_logits=True, ranks_out=rk)
            want = (z.float().unsqueeze(1) >= lgt.unsqueeze(2)).sum(dim=2)
            off_by = (rk.long() - want).abs().max().item()
            if off_by > 1:
                fail(f"11 {name}: ranks {rk[0].tolist()}, torch's {want[0].tolist()}")
            try:
                fs.sample_torch(ctx, hidden, weight, ranks_out=rk)  # 2 B entries for B draws
                fail(f"11 {name}: a ranks_out of the wrong size was accepted")
            except fs.FlashSamplingError as e:
                if "ranks_out" not in str(e):
                    fail(f"11 {name}: the error for a bad ranks_out does not name it: {e}")
            print(f"ok 11 {name}: ranks are torch's counts (off by at most {off_by})")
            # 11b. targets (since 0.3.18): row b's id off + 37 b % V (row 0's
            # -1: NaN and 0) gets torch's log-softmax within 1e-4 and the
            # count of its logits >= the target's, off by one at most
            tg = torch.tensor([-1] + [off + (b * 37) % V for b in range(1, B)],
                              dtype=torch.int32, device=dev)
            tl = torch.empty(B, dtype=torch.float32, device=dev)
            tr = torch.empty(B, dtype=torch.int32, device=dev)
            fs.sample_torch(ctx, hidden, weight, vocab_offset=off, target_tokens=tg,
                            target_logprobs_out=tl, target_ranks_out=tr)
            idx = (tg[1:].long() - off).unsqueeze(1)
            lsm = torch.log_softmax(z, dim=1)[1:].gather(1, idx).squeeze(1)
            zt = z[1:].gather(1, idx).float()
            trw = (z[1:].float() >= zt).sum(dim=1)
            terr = (tl[1:].double() - lsm).abs().max().item()
            toff = (tr[1:].long() - trw).abs().max().item()
            if not (torch.isnan(tl[0]).item() and tr[0].item() == 0 and terr <= 1e-4 and
                    toff <= 1):
                fail(f"11b {name}: targets {tl.tolist()} {tr.tolist()}, torch's "
                     f"{lsm.tolist()} {trw.tolist()}")
            print(f"ok 11b {name}: targets' logprobs within {terr:.2g} and ranks (off by at "
                  f"most {toff}) are torch's")
            # 12. one rank of a vocabulary-parallel head through NCCL: the
            # unsharded call's draw (tokens and logits bit for bit)
            if comm is None:
                print(f"SKIPPED 12 {name}: {why}")
                continue
            lp1 = torch.empty((B, S), dtype=torch.float32, device=dev)
            lp2 = torch.empty_like(lp1)
            rk1 = torch.full((B, S), -1, dtype=torch.int32, device=dev)
            rk2 = torch.full((B, S), -1, dtype=torch.int32, device=dev)
            kw = dict(temperature=0.8, seed=31, num_samples=S, vocab_offset=off,
                      return_logits=True, token_mask=mask.to(dev))
            t1, l1 = fs.sample_torch(ctx, hidden, weight, logprobs_out=lp1, ranks_out=rk1, **kw)
            t2, l2 = fs.sample_torch(ctx, hidden, weight, logprobs_out=lp2, ranks_out=rk2,
                                     nccl_comm=comm, **kw)
            if not torch.equal(t1, t2) or not torch.equal(l1, l2):
                fail(f"12 {name}: nccl_comm= drew {t2.view(-1).tolist()} "
                     f"{l2.view(-1).tolist()}, unsharded {t1.view(-1).tolist()} "
                     f"{l1.view(-1).tolist()}")
            err = (lp1 - lp2).abs().max().item()
            if not err <= 1e-4:
                fail(f"12 {name}: nccl_comm= logprobs off the unsharded call's by {err}")
            if not torch.equal(rk1, rk2) or rk1.min().item() < 1:
                fail(f"12 {name}: nccl_comm= ranks {rk2.view(-1).tolist()}, unsharded "
                     f"{rk1.view(-1).tolist()}")
            print(f"ok 12 {name}: one NCCL rank draws the unsharded call's tokens, logits "
                  f"and ranks (logprobs within {err:.2g})")
    if comm is not None:
        torch.cuda.synchronize(dev)
        nccl.ncclCommDestroy(comm)


if __name__ == "__main__":
    main()
