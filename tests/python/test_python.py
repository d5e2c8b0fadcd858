"""cpu/python: python/flashsampling.py against the library, under the fake
driver (tests/fakecuda: an H200 that runs nothing).  Checked:
  1. the ctypes structs have the C layout, field by field (tests/python/layout.c);
  2. the module loads the library of the header's version;
  3. a context opens, names the shipped default kernel of Qwen3-8B B = 256,
     and bad input raises FlashSamplingError with the library's status and
     message; a closed context raises too;
  4. reference_sample (the CPU reference, host pointers) through the structs:
     greedy rows equal an argmax computed here in Python over the same bf16
     values, with a padded row stride and a vocab_offset (so a field out of
     place changes the answer); sampled rows repeat under the same seed; a
     logit bias through Options moves greedy rows to the biased tokens;
  5. sample_torch without torch raises ImportError (skipped where torch is
     installed).
Usage: test_python.py LAYOUT_BINARY   (FLASHSAMPLING_LIB, PYTHONPATH, the
fake driver's LD_LIBRARY_PATH and FS_FAKE_CUDA come from ctest)."""
import ctypes
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
    try:
        ctx.variant_name(p, s)
        fail("a closed context raised nothing")
    except fs.FlashSamplingError as e:
        print(f"ok 3c: closed context: {e}")


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


def main():
    version = check_layout(sys.argv[1])
    if fs.library().fs_version_number() != version:
        fail(f"library {fs.version()} against header {version}")
    print(f"ok 2: library {fs.version()}")
    check_context()
    check_reference()
    try:
        import torch  # noqa: F401
        print("SKIPPED 5: torch is installed here (gpu/python runs sample_torch)")
    except ImportError:
        try:
            fs.sample_torch(None, None, None)
            fail("sample_torch without torch raised nothing")
        except ImportError:
            print("ok 5: sample_torch without torch raises ImportError")


if __name__ == "__main__":
    main()
