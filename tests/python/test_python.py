"""cpu/python: python/flashsampling.py against the library, under the fake
driver (tests/fakecuda: an H200 that runs nothing).  Checked:
  1. the ctypes structs have the C layout, field by field (tests/python/layout.c);
  2. the module loads the library of the header's version;
  3. a context opens, names the shipped default kernel of Qwen3-8B B = 256,
     and bad input raises FlashSamplingError with the library's status and
     message (a filter scalar out of range in Options too, through
     Context.sample); Context.sample_nccl reaches fs_sample_nccl_ex (a
     NULL communicator, as None, 0 or c_void_p(None), refused naming it); a
     closed context raises too;
  4. reference_sample (the CPU reference, host pointers) through the structs:
     greedy rows equal an argmax computed here in Python over the same bf16
     values, with a padded row stride and a vocab_offset (so a field out of
     place changes the answer); sampled rows repeat under the same seed; a
     logit bias through Options moves greedy rows to the biased tokens, and
     a repetition penalty (since 0.3.9) of 1e-6 on a positive logit too;
     top logprobs, ranks and (since 0.3.18) targets' logprobs and ranks
     through Options are Python's (row 0's target -1: NaN and 0);
     the filters through Options (since 0.3.4): each scalar out of range and
     each misaligned per-row array is refused naming its field; greedy rows
     are unchanged by filters; top_k 1, min_p 1 and a tiny top_p, scalar or
     per-row (host arrays of B entries), make sampled rows greedy, and a row
     whose per-row value keeps all (0, 0, 1) draws its unfiltered tokens;
  5. sample_torch checks its filter scalars before it needs torch (a top_k
     that is negative, past int32 or not an int, a min_p / top_p outside
     [0, 1] or NaN or not a number: FlashSamplingError naming it); without
     torch it raises ImportError (that part skipped where torch is
     installed); with a stand-in torch module (a few dtypes, tensors that
     are shapes), per-row temperatures, seeds and offsets of B - 1 or B + 1
     elements and a token_mask of too few words or rows raise
     FlashSamplingError naming them before any kernel runs (a torch.empty
     reached means the tensor was taken).
Usage: test_python.py LAYOUT_BINARY   (FLASHSAMPLING_LIB, PYTHONPATH, the
fake driver's LD_LIBRARY_PATH and FS_FAKE_CUDA come from ctest)."""
import ctypes
import math
import random
import struct
import subprocess
import sys

import flashsampling as fs


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check_layout(layout_binary):
    lines = subprocess.run([layout_binary], check=True, capture_output=True,
                           text=True).stdout.split("\n")
    structs = {"Problem": fs.Problem, "Sampling": fs.Sampling, "Outputs": fs.Outputs,
               "Options": fs.Options}
    fields = {name: [] for name in structs}
    version = None
    for line in filter(None, lines):
        parts = line.split()
        if parts[0] == "version":
            version = int(parts[1])
            continue
        name, field = parts[0], parts[1]
        cls = structs[name]
        if field == "sizeof":
            if ctypes.sizeof(cls) != int(parts[2]):
                fail(f"sizeof {name}: ctypes {ctypes.sizeof(cls)}, C {parts[2]}")
            continue
        fields[name].append(field)
        desc = getattr(cls, field, None)
        if desc is None or (desc.offset, desc.size) != (int(parts[2]), int(parts[3])):
            got = None if desc is None else (desc.offset, desc.size)
            fail(f"{name}.{field}: ctypes (offset, size) {got}, C ({parts[2]}, {parts[3]})")
    for name, cls in structs.items():
        mine = [f for f, _ in cls._fields_]
        if mine != fields[name]:
            fail(f"{name}: ctypes fields {mine}, C fields {fields[name]}")
    print(f"ok 1: the four structs match the C layout ({sum(map(len, fields.values()))} fields)")
    return version


def bf16(x):
    """The bf16 bits of float x (round to nearest even) and their value."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u, struct.unpack("<f", struct.pack("<I", u << 16))[0]


def check_context():
    with fs.Context(0) as ctx:
        p = fs.Problem(batch=256, hidden=4096, vocab=151936, dtype=fs.DTYPE_BF16)
        s = fs.Sampling(temperature=1.0, num_samples=1)
        name = ctx.variant_name(p, s)
        if not name.startswith("fsamp_bf16_sm90a_") or "shipped defaults" not in name:
            fail(f"variant_name: {name!r}: not a shipped default for sm90a")
        print(f"ok 3a: variant_name: {name}")
        try:
            ctx.prepare(fs.Problem(batch=0, hidden=4096, vocab=151936, dtype=fs.DTYPE_BF16), s)
            fail("prepare with batch=0 raised nothing")
        except fs.FlashSamplingError as e:
            if e.status != fs.INVALID_ARGUMENT or "batch" not in e.message:
                fail(f"prepare with batch=0: {e}")
            print(f"ok 3b: {e}")
        # fs_sample_ex validates Options before it touches the (fake) device:
        # the addresses are never read
        pv = fs.Problem(batch=4, hidden=4096, vocab=151936, dtype=fs.DTYPE_BF16,
                        hidden_states=0x10000, weight=0x20000)
        try:
            ctx.sample(pv, s, fs.Outputs(tokens=0x30000), options=fs.Options(top_p=1.5))
            fail("sample with options.top_p=1.5 raised nothing")
        except fs.FlashSamplingError as e:
            if e.status != fs.INVALID_ARGUMENT or "options->top_p" not in e.message:
                fail(f"sample with options.top_p=1.5: {e}")
            print(f"ok 3c: {e}")
        # Context.sample_nccl reaches fs_sample_nccl_ex, which refuses a NULL
        # communicator before anything else (no NCCL, no device work)
        msg = None
        for comm in (None, 0, ctypes.c_void_p(None)):
            try:
                ctx.sample_nccl(pv, s, fs.Outputs(tokens=0x30000), comm)
                fail(f"sample_nccl with nccl_comm={comm!r} raised nothing")
            except fs.FlashSamplingError as e:
                if e.status != fs.INVALID_ARGUMENT or "nccl_comm=NULL" not in e.message or \
                        not str(e).startswith("fs_sample_nccl_ex"):
                    fail(f"sample_nccl with nccl_comm={comm!r}: {e}")
                msg = str(e)
        print(f"ok 3c2: {msg}")
    try:
        ctx.variant_name(p, s)
        fail("a closed context raised nothing")
    except fs.FlashSamplingError as e:
        print(f"ok 3d: closed context: {e}")


def check_reference():
    rng = random.Random(5)
    B, D, V, HS, off = 3, 16, 100, 24, 1000  # H rows padded to 24 elements
    h_bits, h_val = [], []
    for _ in range(B * HS):
        bits, val = bf16(rng.uniform(-1, 1))
        h_bits.append(bits)
        h_val.append(val)
    w_bits, w_val = zip(*(bf16(rng.uniform(-1, 1)) for _ in range(V * D)))
    H = (ctypes.c_uint16 * len(h_bits))(*h_bits)
    W = (ctypes.c_uint16 * len(w_bits))(*w_bits)
    p = fs.Problem(B, D, V, off, fs.DTYPE_BF16, ctypes.addressof(H), HS, ctypes.addressof(W), 0)
    tokens = (ctypes.c_int32 * B)()
    logits = (ctypes.c_float * B)()
    fs.reference_sample(p, fs.Sampling(temperature=0.0, num_samples=1), tokens, logits)
    for b in range(B):
        z = [sum(h_val[b * HS + k] * w_val[v * D + k] for k in range(D)) for v in range(V)]
        best = max(range(V), key=lambda v: z[v])
        if tokens[b] != off + best or abs(logits[b] - z[best]) > 1e-4:
            fail(f"greedy row {b}: token {tokens[b]} logit {logits[b]}, "
                 f"Python's argmax {off + best} logit {z[best]}")
    print(f"ok 4a: greedy rows equal Python's argmax: {list(tokens)}")
    draws = []
    for seed in (7, 7):
        t = (ctypes.c_int32 * (B * 4))()
        fs.reference_sample(p, fs.Sampling(temperature=1.0, num_samples=4, seed=seed), t)
        draws.append(list(t))
    if draws[0] != draws[1] or not all(off <= x < off + V for x in draws[0]):
        fail(f"sampled rows under seed 7: {draws}")
    print(f"ok 4b: sampled rows repeat under one seed: {draws[0]}")
    # a logit bias through Options: +1000 on token off + 3b + 1 of row b makes it
    # that greedy row's argmax (a field out of place would leave the argmax or
    # move every row to the same token)
    bt = (ctypes.c_int32 * (B * 2))(*[off + 3 * b + 1 if j == 0 else -1
                                       for b in range(B) for j in range(2)])
    bv = (ctypes.c_float * (B * 2))(*([1000.0, 0.0] * B))
    opt = fs.Options(logit_bias_tokens=ctypes.addressof(bt), logit_bias_values=ctypes.addressof(bv),
                     logit_bias_count=2)
    t = (ctypes.c_int32 * B)()
    fs.reference_sample(p, fs.Sampling(temperature=0.0, num_samples=1), t, options=opt)
    if list(t) != [off + 3 * b + 1 for b in range(B)]:
        fail(f"greedy rows with +1000 on token off + 3b + 1: {list(t)}")
    print(f"ok 4c: a logit bias through Options moves greedy rows: {list(t)}")
    # a repetition penalty through Options (since 0.3.9): r = 1e-6 makes the
    # listed token's positive logit huge, 1e6 its negative one tiny: with a
    # value of 0 on token off + 3b + 2, a positive logit there wins the greedy row
    # (a field out of place would leave the greedy rows as they were)
    z = [[sum(h_val[b * HS + k] * w_val[v * D + k] for k in range(D)) for v in range(V)]
         for b in range(B)]
    pos = [next(v for v in range(V) if z[b][v] > 0 and v != tokens[b] - off) for b in range(B)]
    bt2 = (ctypes.c_int32 * B)(*[off + pos[b] for b in range(B)])
    bv2 = (ctypes.c_float * B)(*([0.0] * B))
    t2 = (ctypes.c_int32 * B)()
    fs.reference_sample(p, fs.Sampling(temperature=0.0, num_samples=1), t2,
                        options=fs.Options(logit_bias_tokens=ctypes.addressof(bt2),
                                           logit_bias_values=ctypes.addressof(bv2),
                                           logit_bias_count=1, repetition_penalty=1e-6))
    if list(t2) != [off + pos[b] for b in range(B)]:
        fail(f"greedy rows with a repetition penalty of 1e-6 on a positive logit: {list(t2)}")
    print(f"ok 4c': a repetition penalty through Options moves greedy rows: {list(t2)}")
    # top logprobs through Options (since 0.3.12): each row's 3 largest logits in
    # order, with z - log-sum-exp (a field out of place would leave the lists
    # unwritten or the call refused)
    n = 3
    tt = (ctypes.c_int32 * (B * n))()
    tv = (ctypes.c_float * (B * n))()
    fs.reference_sample(p, fs.Sampling(temperature=0.0, num_samples=1), (ctypes.c_int32 * B)(),
                        options=fs.Options(top_logprobs=n, top_logprob_tokens=ctypes.addressof(tt),
                                           top_logprob_values=ctypes.addressof(tv)))
    for b in range(B):
        order = sorted(range(V), key=lambda v: (-z[b][v], v))[:n]
        lse = math.log(sum(math.exp(x) for x in z[b]))
        got = list(tt[b * n:(b + 1) * n])
        if got != [off + v for v in order] or \
                any(abs(tv[b * n + i] - (z[b][order[i]] - lse)) > 1e-4 for i in range(n)):
            fail(f"row {b}'s top logprobs: {got} {list(tv[b * n:(b + 1) * n])}, Python's "
                 f"{[off + v for v in order]}")
    print(f"ok 4c'': top logprobs through Options are Python's: {list(tt[:n])}")
    # ranks through Options (since 0.3.13): a greedy draw ranks 1 (no ties in
    # these logits), a sampled one by the count of logits >= its own
    rk = (ctypes.c_int32 * B)()
    tg = (ctypes.c_int32 * B)()
    lg = (ctypes.c_float * B)()
    for T in (0.0, 2.0):
        fs.reference_sample(p, fs.Sampling(temperature=T, num_samples=1, seed=11), tg, lg,
                            options=fs.Options(ranks=ctypes.addressof(rk)))
        want = [sum(1 for x in z[b] if ctypes.c_float(x).value >= lg[b]) for b in range(B)]
        if list(rk) != want or (T == 0.0 and any(r != 1 for r in rk)):
            fail(f"ranks at T={T}: {list(rk)}, Python's {want}")
    print(f"ok 4c3: ranks through Options are Python's: {list(rk)}")
    # targets through Options (since 0.3.18): row b's raw logprob and rank of
    # a given id, -1 (row 0) NaN and 0 (a field out of place would leave them
    # unwritten or the call refused)
    tt = (ctypes.c_int32 * B)(*[off + (b * 7) % V if b else -1 for b in range(B)])
    tl = (ctypes.c_float * B)()
    tr = (ctypes.c_int32 * B)()
    fs.reference_sample(p, fs.Sampling(temperature=1.0, num_samples=1, seed=3),
                        (ctypes.c_int32 * B)(),
                        options=fs.Options(target_tokens=ctypes.addressof(tt),
                                           target_logprobs=ctypes.addressof(tl),
                                           target_ranks=ctypes.addressof(tr)))
    if not (math.isnan(tl[0]) and tr[0] == 0):
        fail(f"target -1: logprob {tl[0]}, rank {tr[0]}, not NaN and 0")
    for b in range(1, B):
        v = (b * 7) % V
        lse = math.log(sum(math.exp(x) for x in z[b]))
        zt = ctypes.c_float(z[b][v]).value
        want = sum(1 for x in z[b] if ctypes.c_float(x).value >= zt)
        if abs(tl[b] - (z[b][v] - lse)) > 1e-4 or tr[b] != want:
            fail(f"row {b}'s target {tt[b]}: {tl[b]} rank {tr[b]}, Python's "
                 f"{z[b][v] - lse} {want}")
    print(f"ok 4c4: targets through Options are Python's: {list(tl)} {list(tr)}")
    check_filters(p, list(tokens))


def check_filters(p, greedy):
    """The filters of Options through reference_sample (p: check_reference's
    problem, greedy: its greedy tokens)."""
    B = p.batch

    def draw(T, S=1, seed=7, **kw):
        t = (ctypes.c_int32 * (B * S))()
        fs.reference_sample(p, fs.Sampling(temperature=T, num_samples=S, seed=seed), t,
                            options=fs.Options(**kw))
        return [list(t[b * S:(b + 1) * S]) for b in range(B)]

    # each scalar out of range, and each per-row array misaligned (inside a real
    # host buffer, so nothing outside it could be read), is refused naming its field
    buf = (ctypes.c_float * (B + 1))()
    odd = ctypes.addressof(buf) + 2
    msg = None
    for kw, field in ((dict(min_p=1.5), "min_p"), (dict(min_p=-0.25), "min_p"),
                      (dict(min_p=float("nan")), "min_p"), (dict(top_k=-1), "top_k"),
                      (dict(top_p=1.5), "top_p"), (dict(top_p=-0.5), "top_p"),
                      (dict(min_ps=odd), "min_ps"), (dict(top_ks=odd), "top_ks"),
                      (dict(top_ps=odd), "top_ps")):
        try:
            draw(1.0, **kw)
            fail(f"Options({kw}) raised nothing")
        except fs.FlashSamplingError as e:
            if e.status != fs.INVALID_ARGUMENT or f"options->{field}" not in e.message:
                fail(f"Options({kw}): {e}")
            msg = e.message
    print(f"ok 4d: bad filter scalars and misaligned per-row arrays refused, e.g. {msg}")
    # greedy rows are unchanged by filters (each keeps the largest logit); the
    # edges of the scalars' ranges are accepted
    for kw in (dict(top_k=1, top_p=0.5, min_p=0.5), dict(top_k=2**31 - 1, top_p=1.0, min_p=1.0),
               dict(top_p=0.0, min_p=0.0, top_k=0)):
        if [r[0] for r in draw(0.0, **kw)] != greedy:
            fail(f"greedy rows with Options({kw}): {draw(0.0, **kw)}, unfiltered {greedy}")
    print(f"ok 4e: greedy rows unchanged by filters: {greedy}")
    # a filter keeping only the largest logit makes sampled rows greedy: scalars,
    # then per-row host arrays whose row 1 keeps all (its unfiltered draws)
    S = 8
    plain = draw(1.0, S)
    if all(r == [g] * S for r, g in zip(plain, greedy)):
        fail(f"unfiltered sampled rows are all greedy: {plain}")
    for kw in (dict(top_k=1), dict(min_p=1.0), dict(top_p=1e-6)):
        got = draw(1.0, S, **kw)
        if got != [[g] * S for g in greedy]:
            fail(f"sampled rows with Options({kw}): {got}, greedy {greedy}")
    keep = []

    def rows(ctype, values):
        a = (ctype * B)(*values)
        keep.append(a)
        return ctypes.addressof(a)

    only_largest = {"top_ks": (ctypes.c_int32, 1, 0), "min_ps": (ctypes.c_float, 1.0, 0.0),
                    "top_ps": (ctypes.c_float, 1e-6, 1.0)}
    for field, (ctype, one, all_) in only_largest.items():
        got = draw(1.0, S, **{field: rows(ctype, [all_ if b == 1 else one for b in range(B)])})
        want = [plain[b] if b == 1 else [greedy[b]] * S for b in range(B)]
        if got != want:
            fail(f"sampled rows with per-row {field}: {got}, want {want}")
    print(f"ok 4f: top_k 1, min_p 1, top_p 1e-6 (scalar and per-row) draw greedy rows; "
          f"a row that keeps all draws {plain[1]} unfiltered")


def check_sample_torch_filters():
    msg = None
    for kw, name in ((dict(top_k=-1), "top_k"), (dict(top_k=2**31), "top_k"),
                     (dict(top_k=1.5), "top_k"), (dict(top_k=[1, 2]), "top_k"),
                     (dict(min_p=1.5), "min_p"), (dict(min_p=float("nan")), "min_p"),
                     (dict(min_p="0.1"), "min_p"), (dict(top_p=-0.1), "top_p"),
                     (dict(top_p=float("inf")), "top_p"), (dict(top_p=[0.9]), "top_p")):
        try:
            fs.sample_torch(None, None, None, **kw)
            fail(f"sample_torch({kw}) raised nothing")
        except fs.FlashSamplingError as e:
            if e.status != fs.INVALID_ARGUMENT or not e.message.startswith(name + "=") or \
                    f"{name}s" not in e.message:
                fail(f"sample_torch({kw}): {e}")
            msg = str(e)
        except ImportError:
            fail(f"sample_torch({kw}) reached torch: its {name} was not checked first")
    print(f"ok 5a: sample_torch refuses bad filter scalars before torch, e.g. {msg}")


class _FakeTensor:
    """What sample_torch reads of a CUDA tensor: a contiguous one of a shape."""
    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.is_cuda, self.device = tuple(shape), dtype, True, "cuda:0"

    def dim(self):
        return len(self.shape)

    def numel(self):
        return math.prod(self.shape)

    def stride(self, i=None):
        st = tuple(math.prod(self.shape[j + 1:]) for j in range(len(self.shape)))
        return st if i is None else st[i]

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return 4096


class _ReachedEmpty(Exception):
    pass


def check_sample_torch_sizes():
    import types
    fake = types.ModuleType("torch")
    for name in ("bfloat16", "float16", "float32", "int32", "int64"):
        setattr(fake, name, name)

    def empty(*a, **k):
        raise _ReachedEmpty()
    fake.empty = empty
    saved, saved_dtypes = sys.modules.get("torch"), fs._TORCH_DTYPES
    sys.modules["torch"], fs._TORCH_DTYPES = fake, None
    try:
        B, D, V, off = 3, 64, 1000, 37
        h, w = _FakeTensor((B, D), "bfloat16"), _FakeTensor((V, D), "bfloat16")
        words = (off + V + 31) // 32
        cases = [("temperatures", _FakeTensor((n,), "float32")) for n in (B - 1, B + 1)] + \
                [("seeds", _FakeTensor((n,), "int64")) for n in (B - 1, B + 1)] + \
                [("offsets", _FakeTensor((n,), "int64")) for n in (B - 1, B + 1)] + \
                [("token_mask", _FakeTensor(s, "int32"))
                 for s in ((B, words - 1), (B - 1, words), (B * words,))]
        for kw, t in cases:
            try:
                fs.sample_torch(None, h, w, vocab_offset=off, **{kw: t})
                fail(f"sample_torch({kw} of shape {t.shape}) raised nothing")
            except fs.FlashSamplingError as e:
                if e.status != fs.INVALID_ARGUMENT or not e.message.startswith(kw + ":"):
                    fail(f"sample_torch({kw} of shape {t.shape}): {e}")
            except _ReachedEmpty:
                fail(f"sample_torch took {kw} of shape {t.shape} (B = {B}, {words} words)")
        # the right sizes pass the checks (and reach torch.empty)
        for kw, t in (("temperatures", _FakeTensor((B,), "float32")),
                      ("token_mask", _FakeTensor((B, words), "int32"))):
            try:
                fs.sample_torch(None, h, w, vocab_offset=off, **{kw: t})
                fail(f"sample_torch({kw} of shape {t.shape}) did not reach torch.empty")
            except _ReachedEmpty:
                pass
    finally:
        fs._TORCH_DTYPES = saved_dtypes
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved
    print(f"ok 5c: sample_torch refuses per-row tensors and masks of the wrong size "
          f"({len(cases)} cases) and takes the right ones")


def main():
    version = check_layout(sys.argv[1])
    if fs.library().fs_version_number() != version:
        fail(f"library {fs.version()} against header {version}")
    print(f"ok 2: library {fs.version()}")
    check_context()
    check_reference()
    check_sample_torch_filters()
    check_sample_torch_sizes()
    try:
        import torch  # noqa: F401
        print("SKIPPED 5b: torch is installed here (gpu/python runs sample_torch)")
    except ImportError:
        for kw in ({}, dict(min_p=1.0, top_k=2**31 - 1, top_p=0.0)):
            try:
                fs.sample_torch(None, None, None, **kw)
                fail(f"sample_torch({kw}) without torch raised nothing")
            except ImportError:
                pass
        print("ok 5b: sample_torch without torch raises ImportError (valid filters too)")


if __name__ == "__main__":
    main()
