"""flashsampling from Python: the C library through ctypes (no build step).

    import flashsampling as fs
    with fs.Context(0) as ctx:                      # GPU 0
        tokens = fs.sample_torch(ctx, hidden, weight, temperature=0.7, seed=42)

`sample_torch` takes CUDA tensors (bf16 or fp16, H [B, D] and W [V, D] with
unit stride along D) and enqueues the draw on PyTorch's current stream of
their device; it returns int32 tokens [B, num_samples] (global ids).  The
lower level mirrors runtime/flashsampling.h: the structs `Problem`,
`Sampling`, `Outputs`, `Options`, a `Context` with `prepare`, `sample`,
`sample_nccl` (a vocabulary-parallel rank's call), `variant_name` and
`set_noise`, and `reference_sample` (the CPU reference, host pointers).
Every failure raises `FlashSamplingError` with the library's status and its
message (the argument, its value and the rule it broke).

The library is found by $FLASHSAMPLING_LIB (a path), else the loader's search
(ctypes.util.find_library("flashsampling"), LD_LIBRARY_PATH).  torch is
imported only by sample_torch.
"""
import ctypes
import ctypes.util
import math
import numbers
import operator
import os

__all__ = [
    "FlashSamplingError", "Problem", "Sampling", "Outputs", "Options", "Context",
    "reference_sample", "sample_torch", "library", "version",
    "OK", "INVALID_ARGUMENT", "DTYPE_BF16", "DTYPE_FP16", "NOISE_TOKEN", "NOISE_GROUP16",
]

# Stable values of flashsampling.h.
OK, INVALID_ARGUMENT = 0, 1
DTYPE_BF16, DTYPE_FP16 = 1, 2
NOISE_TOKEN, NOISE_GROUP16 = 0, 1
ABI_VERSION = (0, 3)  # the header these structs mirror: MAJOR, MINOR


class Problem(ctypes.Structure):
    """fs_problem: H [B, D] and W [V, D] (device pointers), strides in elements."""
    _fields_ = [("batch", ctypes.c_int32), ("hidden", ctypes.c_int32),
                ("vocab", ctypes.c_int32), ("vocab_offset", ctypes.c_int64),
                ("dtype", ctypes.c_int32), ("hidden_states", ctypes.c_void_p),
                ("hidden_stride", ctypes.c_int64), ("weight", ctypes.c_void_p),
                ("weight_stride", ctypes.c_int64)]


class Sampling(ctypes.Structure):
    """fs_sampling: scalar temperature / seed / offset or per-row device arrays."""
    _fields_ = [("temperature", ctypes.c_float), ("temperatures", ctypes.c_void_p),
                ("num_samples", ctypes.c_int32), ("seed", ctypes.c_uint64),
                ("seeds", ctypes.c_void_p), ("offset", ctypes.c_uint64),
                ("offsets", ctypes.c_void_p)]


class Outputs(ctypes.Structure):
    """fs_outputs: tokens (required), logits and keys (optional), [B, S]."""
    _fields_ = [("tokens", ctypes.c_void_p), ("logits", ctypes.c_void_p),
                ("keys", ctypes.c_void_p)]


class Options(ctypes.Structure):
    """fs_options: size is set by the constructor; token_mask is [B, stride] words,
    logprobs [B, S] floats (device pointers for Context.sample, host ones for
    reference_sample); logit_softcap 0 (none) or c > 0: logits c tanh(z / c);
    logit_bias_tokens (int32) and logit_bias_values (float32), [B, logit_bias_count]:
    a value added to each listed token's logit (-1 pads); the filters of sampled
    rows (since 0.3.4), each a scalar or, where its array is not None, [B]
    per-row values: min_p / min_ps (float32; 0 none, else keep p_i >= min_p x the
    largest p), top_k / top_ks (int32; 0 none, else the k largest logits, ties
    kept), top_p / top_ps (float32; 0 and 1 none, else the fewest largest logits
    whose mass reaches p).  Scalars: min_p and top_p in [0, 1], top_k >= 0.
    repetition_penalty (0 or 1 none, else r > 0) / repetition_penalties ([B] float32,
    per row; since 0.3.9): each token the row's logit bias lists has its logit z
    replaced by z / r where z > 0, z r else, before its values are added.
    top_logprobs n (0 none, up to 256; since 0.3.12), top_logprob_tokens (int32) and
    top_logprob_values (float32), [B, n]: each row's n most likely tokens by raw
    logit and their logprobs, in order.  ranks (int32, [B, S]; since 0.3.13): each
    draw's rank, the count of the call's ids whose raw logit is >= its own.
    target_tokens (int32, [B]; since 0.3.18): a given id a row, whose raw logprob goes to
    target_logprobs (float32, [B]) and rank to target_ranks (int32, [B]), either or both
    (one GPU only)."""
    _fields_ = [("size", ctypes.c_size_t), ("token_mask", ctypes.c_void_p),
                ("token_mask_stride", ctypes.c_int64), ("logprobs", ctypes.c_void_p),
                ("logit_softcap", ctypes.c_float), ("logit_bias_tokens", ctypes.c_void_p),
                ("logit_bias_values", ctypes.c_void_p), ("logit_bias_count", ctypes.c_int32),
                ("min_p", ctypes.c_float), ("min_ps", ctypes.c_void_p),
                ("top_k", ctypes.c_int32), ("top_ks", ctypes.c_void_p),
                ("top_p", ctypes.c_float), ("top_ps", ctypes.c_void_p),
                ("repetition_penalty", ctypes.c_float),
                ("repetition_penalties", ctypes.c_void_p),
                ("top_logprobs", ctypes.c_int32), ("top_logprob_tokens", ctypes.c_void_p),
                ("top_logprob_values", ctypes.c_void_p), ("ranks", ctypes.c_void_p),
                ("target_tokens", ctypes.c_void_p), ("target_logprobs", ctypes.c_void_p),
                ("target_ranks", ctypes.c_void_p)]

    def __init__(self, token_mask=None, token_mask_stride=0, logprobs=None, logit_softcap=0.0,
                 logit_bias_tokens=None, logit_bias_values=None, logit_bias_count=0,
                 min_p=0.0, min_ps=None, top_k=0, top_ks=None, top_p=0.0, top_ps=None,
                 repetition_penalty=0.0, repetition_penalties=None, top_logprobs=0,
                 top_logprob_tokens=None, top_logprob_values=None, ranks=None,
                 target_tokens=None, target_logprobs=None, target_ranks=None):
        super().__init__(ctypes.sizeof(Options), token_mask, token_mask_stride, logprobs,
                         logit_softcap, logit_bias_tokens, logit_bias_values, logit_bias_count,
                         min_p, min_ps, top_k, top_ks, top_p, top_ps, repetition_penalty,
                         repetition_penalties, top_logprobs, top_logprob_tokens,
                         top_logprob_values, ranks, target_tokens, target_logprobs,
                         target_ranks)


class FlashSamplingError(RuntimeError):
    """A call returned a status other than FS_OK; .status and .message hold them."""

    def __init__(self, func, status, message):
        self.status, self.message = status, message
        name = _lib().fs_status_string(status).decode()
        super().__init__(f"{func}: {name} ({status}): {message}")


_LIB = None


def _lib():
    """The loaded library, its prototypes declared (once)."""
    global _LIB
    if _LIB is not None:
        return _LIB
    path = os.environ.get("FLASHSAMPLING_LIB") or ctypes.util.find_library("flashsampling") \
        or "libflashsampling.so"
    lib = ctypes.CDLL(path)
    P = ctypes.POINTER
    vp, i32, cp = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    protos = {
        "fs_version_number": (i32, []), "fs_version_string": (cp, []),
        "fs_status_string": (cp, [i32]),
        "fs_context_create": (i32, [i32, P(vp)]),
        "fs_context_create_from_cucontext": (i32, [vp, P(vp)]),
        "fs_context_destroy": (None, [vp]),
        "fs_last_error": (cp, [vp]), "fs_last_compile_log": (cp, [vp]),
        "fs_prepare": (i32, [vp, P(Problem), P(Sampling)]),
        "fs_sample_ex": (i32, [vp, P(Problem), P(Sampling), P(Options), P(Outputs), vp]),
        "fs_sample_nccl_ex": (i32, [vp, P(Problem), P(Sampling), P(Options), P(Outputs), vp,
                                    vp]),
        "fs_variant_name": (i32, [vp, P(Problem), P(Sampling), cp, ctypes.c_size_t]),
        "fs_context_set_noise": (i32, [vp, i32]),
        "fs_reference_sample_ex": (i32, [P(Problem), P(Sampling), i32, P(Options), vp, vp, vp]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    major, minor = divmod(lib.fs_version_number() // 100, 100)
    if (major, minor) != ABI_VERSION:
        raise ImportError(f"{path} is flashsampling {lib.fs_version_string().decode()}; "
                          f"this module mirrors the {ABI_VERSION[0]}.{ABI_VERSION[1]} header")
    _LIB = lib
    return lib


def library():
    """The ctypes handle of libflashsampling (loaded on first use)."""
    return _lib()


def version():
    """The linked library's version string, e.g. "0.3.6"."""
    return _lib().fs_version_string().decode()


def _check(func, status, ctx=None):
    if status != OK:
        raise FlashSamplingError(func, status, _lib().fs_last_error(ctx).decode())


class Context:
    """An fs_context on one GPU; close() (or `with`) destroys it."""

    def __init__(self, device=0, cu_context=None):
        h = ctypes.c_void_p()
        lib = _lib()
        if cu_context is None:
            _check("fs_context_create", lib.fs_context_create(device, ctypes.byref(h)))
        else:
            _check("fs_context_create_from_cucontext",
                   lib.fs_context_create_from_cucontext(cu_context, ctypes.byref(h)))
        self.handle = h

    def close(self):
        if self.handle:
            _lib().fs_context_destroy(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if _LIB is not None:
            self.close()

    def _h(self):
        if not self.handle:
            raise FlashSamplingError("Context", INVALID_ARGUMENT, "the context is closed")
        return self.handle

    def prepare(self, problem, sampling):
        """fs_prepare: compile, load and allocate for this shape (not capturable)."""
        h = self._h()
        _check("fs_prepare", _lib().fs_prepare(h, problem, sampling), h)

    def sample(self, problem, sampling, outputs, stream=0, options=None):
        """fs_sample_ex, asynchronous on `stream` (a cudaStream_t as an int)."""
        h = self._h()
        _check("fs_sample_ex", _lib().fs_sample_ex(h, problem, sampling, options, outputs,
                                                  stream or None), h)

    def sample_nccl(self, problem, sampling, outputs, nccl_comm, stream=0, options=None):
        """fs_sample_nccl_ex: this rank's shard (problem.vocab_offset its first
        row) through an NCCL communicator (an ncclComm_t: an int address or a
        ctypes.c_void_p, e.g. vLLM's PyNcclCommunicator.comm), asynchronous
        on `stream`; every rank gets the tokens one unsharded call would draw.
        Each rank calls it with the same sampling and options."""
        h = self._h()
        comm = nccl_comm.value if isinstance(nccl_comm, ctypes.c_void_p) else nccl_comm
        _check("fs_sample_nccl_ex", _lib().fs_sample_nccl_ex(h, problem, sampling, options,
                                                            outputs, comm or None,
                                                            stream or None), h)

    def variant_name(self, problem, sampling):
        """The kernel variant a call would run, and how it was chosen."""
        h, buf = self._h(), ctypes.create_string_buffer(512)
        _check("fs_variant_name", _lib().fs_variant_name(h, problem, sampling, buf, len(buf)), h)
        return buf.value.decode()

    def set_noise(self, mode):
        """NOISE_TOKEN (the default) or NOISE_GROUP16, for this context's calls."""
        h = self._h()
        _check("fs_context_set_noise", _lib().fs_context_set_noise(h, mode), h)

    def last_compile_log(self):
        return _lib().fs_last_compile_log(self._h()).decode()


def reference_sample(problem, sampling, tokens, logits=None, keys=None, noise=NOISE_TOKEN,
                     options=None):
    """fs_reference_sample_ex on the CPU: every pointer in the structs and the
    outputs (ctypes arrays or addresses) is a HOST pointer."""
    _check("fs_reference_sample_ex",
           _lib().fs_reference_sample_ex(problem, sampling, noise, options, tokens, logits, keys))


_TORCH_DTYPES = None  # {torch.bfloat16: DTYPE_BF16, torch.float16: DTYPE_FP16}, once torch is in


def _shown(x):
    """x for a message: its repr if a number, else its type (not a whole tensor)."""
    if isinstance(x, numbers.Number):
        return repr(x)
    return f"a {type(x).__module__}.{type(x).__name__}"


def _filter_scalars(min_p, top_k, top_p):
    """sample_torch's filter scalars, checked by the library's rules (flashsampling.h:
    min_p and top_p in [0, 1], top_k >= 0) before any struct holds them, so that a
    top_k past int32 does not wrap and a tensor given for a scalar is named."""
    try:
        k = operator.index(top_k)
    except TypeError:
        k = None
    if k is None or not 0 <= k <= 2**31 - 1:
        raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                 f"top_k={_shown(top_k)}: must be an int in 0..2^31-1 (0: no "
                                 "top-k filter; per-row values go in top_ks)")
    for name, x, none in (("min_p", min_p, "0: no min-p filter"),
                          ("top_p", top_p, "0 and 1: no top-p filter")):
        if not isinstance(x, numbers.Real) or math.isnan(x) or not 0.0 <= x <= 1.0:
            raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                     f"{name}={_shown(x)}: must be a number in [0, 1] ({none}; "
                                     f"per-row values go in {name}s)")
    return float(min_p), k, float(top_p)


def sample_torch(ctx, hidden, weight, temperature=1.0, seed=0, offset=0, num_samples=1,
                 vocab_offset=0, temperatures=None, seeds=None, offsets=None, token_mask=None,
                 return_logits=False, stream=None, out=None, logits_out=None,
                 logprobs_out=None, logit_softcap=0.0, logit_bias_tokens=None,
                 logit_bias_values=None, min_p=0.0, top_k=0, top_p=1.0, min_ps=None,
                 top_ks=None, top_ps=None, repetition_penalty=0.0, repetition_penalties=None,
                 top_logprob_tokens_out=None, top_logprob_values_out=None, ranks_out=None,
                 nccl_comm=None, target_tokens=None, target_logprobs_out=None,
                 target_ranks_out=None):
    """Draws num_samples tokens per row of hidden [B, D] against weight [V, D]
    (CUDA tensors of one dtype, bf16 or fp16, unit stride along D) on the
    current stream of their device (or `stream`, a torch.cuda.Stream).
    Per-row temperatures (float32), seeds and offsets (int64, the bits of
    uint64), contiguous CUDA tensors of B elements, and token_mask (int32
    [B, words], words >= ceil((vocab_offset + V) / 32), contiguous: the vLLM /
    xgrammar bitmask) are optional; a tensor of another dtype, size or device
    raises FlashSamplingError naming it.  Returns int32 tokens [B, num_samples], and
    with return_logits also the sampled tokens' float32 logits.
    out (int32) and logits_out (float32), contiguous CUDA tensors of
    B x num_samples elements on that device, receive the results instead of
    new tensors (a buffer that a CUDA graph or an engine keeps); logits_out
    implies return_logits.  The tensors returned are out and logits_out.
    logprobs_out (float32, the same size) receives each draw's log-probability
    under softmax of the raw logits (fs_options.logprobs: no temperature, no
    mask), computed without the logits in memory.  logit_softcap c > 0 makes
    every logit c tanh(z / c) first (Gemma 2's final_logit_softcapping):
    the draw, the logits and the logprobs are of the capped logits.
    logit_bias_tokens (int32) and logit_bias_values (float32), contiguous CUDA
    tensors [B, N] (N <= 16384), add each value to its token's logit for the
    draw (OpenAI's logit_bias; -1 pads a row; the logits and logprobs
    returned stay raw), exactly, inside the fused call.
    min_p, top_k and top_p filter each sampled row's distribution first (vLLM's
    order: min-p, then top-k and top-p together; fs_options, since 0.3.4): the
    draw is exactly from softmax(z / T) over the kept tokens, renormalised.
    min_p (in [0, 1], 0 none) keeps the tokens of probability >= min_p x the
    largest; top_k (>= 0, 0 none) the k largest logits, ties kept; top_p (in
    [0, 1], 0 and 1 none) the fewest largest whose mass reaches p.  min_ps
    (float32), top_ks (int32) and top_ps (float32), contiguous CUDA tensors of
    B elements, give per-row values instead of the scalar (read by the kernel,
    so they may change between graph replays; a per-row value that keeps all
    may be <= 0, or NaN for min_ps / top_ps).  Greedy rows are unchanged; the
    logits and logprobs returned stay raw.  With a logit bias the filters
    see the biased scores (since 0.3.6).  The library's tensor-parallel calls
    take filters too (since 0.3.7).  Not with NOISE_GROUP16 (the
    library refuses it); the first filtered call on a
    context compiles the filter kernel, so make one before capturing.
    repetition_penalty r (0 or 1 none, else r > 0; since 0.3.9), or per row
    repetition_penalties (float32, B elements; NaN, <= 0 or inf none): the
    tokens logit_bias_tokens lists have their logits z replaced by z / r where
    z > 0 and z r else before their values are added (vLLM's penalties: list
    the prompt's and output's tokens, values -(frequency_penalty x count +
    presence_penalty x [count > 0]), 0 for prompt-only ones).
    top_logprob_tokens_out (int32) and top_logprob_values_out (float32),
    contiguous CUDA tensors [B, n] (n <= 256; since 0.3.12), receive each row's
    n most likely tokens by raw logit, in order (equal logits by id), and
    their logprobs (vLLM's logprobs=n): the call then writes the logits to a
    workspace, as the filters do.  ranks_out (int32, B x num_samples elements;
    since 0.3.13) receives each draw's rank, as vLLM reports it beside a
    logprob: the count of ids whose raw logit is >= the draw's (1 for the
    most likely); the call writes the logits to a workspace for it too.
    nccl_comm (an ncclComm_t, e.g. vLLM's PyNcclCommunicator.comm) makes it
    one rank's call of a vocabulary-parallel LM head (Context.sample_nccl):
    weight is this rank's shard, vocab_offset its first row, and every rank,
    calling with the same arguments but its own shard, gets the tokens (and
    logits, logprobs) one unsharded call would draw; a token_mask then holds
    the whole vocabulary's words.  Ranks since 0.3.14; top logprobs since
    0.3.16.  Top logprobs, ranks and a logit bias (up to 1024 entries a row, without
    top logprobs or ranks) under NOISE_GROUP16 since 0.3.17.
    target_tokens (int32, B elements; since 0.3.18; with nccl_comm since 0.3.19, not
    with a logit bias or a sampled call's min_p / top_k / top_p): a given id a
    row (-1 none), as vLLM's prompt_logprobs ask of each prompt position's next token;
    target_logprobs_out (float32, B) receives its raw logprob and target_ranks_out
    (int32, B) its rank (NaN and 0 for an id outside the call's); the call writes the
    logits to a workspace for them."""
    min_p, top_k, top_p = _filter_scalars(min_p, top_k, top_p)  # needs no torch
    import torch  # only here: the rest of the module needs no torch

    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        _TORCH_DTYPES = {torch.bfloat16: DTYPE_BF16, torch.float16: DTYPE_FP16}
    dt = _TORCH_DTYPES.get(hidden.dtype)
    if hidden.dtype != weight.dtype or dt is None:
        raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                 f"hidden.dtype={hidden.dtype}, weight.dtype={weight.dtype}: "
                                 "both must be torch.bfloat16 or both torch.float16")
    for name, t in (("hidden", hidden), ("weight", weight)):
        if t.dim() != 2 or not t.is_cuda or t.stride(1) != 1:
            raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                     f"{name}: shape {tuple(t.shape)}, device {t.device}, "
                                     f"strides {t.stride()}: must be a 2-D CUDA tensor with "
                                     "unit stride along its last dimension")
    B, D = hidden.shape
    V = weight.shape[0]
    dev = hidden.device

    if token_mask is not None:  # [B, W] words, W >= the words of ids below vocab_offset + V
        words = (vocab_offset + V + 31) // 32
        if token_mask.dim() != 2 or token_mask.shape[0] != B or token_mask.shape[1] < words:
            raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                     f"token_mask: shape {tuple(token_mask.shape)}: must be "
                                     f"[B, W] with B = {B} and W >= {words} (the words of ids "
                                     f"below vocab_offset + V = {vocab_offset + V})")

    def ptr(t, name, dtype, numel=None):
        if t is None:
            return None
        if not t.is_cuda or t.device != dev or t.dtype != dtype or not t.is_contiguous() or \
                (numel is not None and t.numel() != numel):
            size = "" if numel is None else f" of {numel} elements"
            raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                     f"{name}: {t.dtype} {tuple(t.shape)} on {t.device}: must be "
                                     f"a contiguous {dtype} tensor{size} on {dev}")
        return t.data_ptr()

    p = Problem(B, D, V, vocab_offset, dt, hidden.data_ptr(), hidden.stride(0),
                weight.data_ptr(), weight.stride(0))
    s = Sampling(temperature, ptr(temperatures, "temperatures", torch.float32, B), num_samples,
                 seed & (2**64 - 1), ptr(seeds, "seeds", torch.int64, B), offset & (2**64 - 1),
                 ptr(offsets, "offsets", torch.int64, B))
    n = B * num_samples
    tokens = out if out is not None else torch.empty((B, num_samples), dtype=torch.int32,
                                                     device=dev)
    logits = logits_out
    if logits is None and return_logits:
        logits = torch.empty((B, num_samples), dtype=torch.float32, device=dev)
    o = Outputs(ptr(tokens, "out", torch.int32, n), ptr(logits, "logits_out", torch.float32, n),
                None)
    opt = None
    nb = 0
    if (logit_bias_tokens is None) != (logit_bias_values is None):
        raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                 "logit_bias_tokens and logit_bias_values: give both or neither")
    if logit_bias_tokens is not None:
        nb = logit_bias_tokens.shape[-1] if logit_bias_tokens.dim() == 2 else -1
        if nb < 0 or logit_bias_tokens.shape[0] != B:
            raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                     f"logit_bias_tokens: shape {tuple(logit_bias_tokens.shape)}: "
                                     f"must be [B, N] with B = {B}")
    filters = min_p or top_k or 0.0 < top_p < 1.0 or min_ps is not None or \
        top_ks is not None or top_ps is not None
    penalty = repetition_penalty or repetition_penalties is not None
    if (top_logprob_tokens_out is None) != (top_logprob_values_out is None):
        raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                 "top_logprob_tokens_out and top_logprob_values_out: give both "
                                 "or neither")
    nt = 0
    if top_logprob_tokens_out is not None:
        nt = top_logprob_tokens_out.shape[-1] if top_logprob_tokens_out.dim() == 2 else -1
        if nt < 0 or top_logprob_tokens_out.shape[0] != B or \
                top_logprob_values_out.shape != top_logprob_tokens_out.shape:
            raise FlashSamplingError("sample_torch", INVALID_ARGUMENT,
                                     "top_logprob_tokens_out, top_logprob_values_out: shapes "
                                     f"{tuple(top_logprob_tokens_out.shape)}, "
                                     f"{tuple(top_logprob_values_out.shape)}: must both be "
                                     f"[B, n] with B = {B}")
    if token_mask is not None or logprobs_out is not None or logit_softcap or nb or filters or \
            penalty or nt or ranks_out is not None or target_tokens is not None or \
            target_logprobs_out is not None or target_ranks_out is not None:
        opt = Options(ptr(token_mask, "token_mask", torch.int32),
                      token_mask.stride(0) if token_mask is not None else 0,
                      ptr(logprobs_out, "logprobs_out", torch.float32, n), logit_softcap,
                      ptr(logit_bias_tokens, "logit_bias_tokens", torch.int32, B * nb),
                      ptr(logit_bias_values, "logit_bias_values", torch.float32, B * nb), nb,
                      min_p, ptr(min_ps, "min_ps", torch.float32, B),
                      top_k, ptr(top_ks, "top_ks", torch.int32, B),
                      top_p, ptr(top_ps, "top_ps", torch.float32, B), float(repetition_penalty),
                      ptr(repetition_penalties, "repetition_penalties", torch.float32, B), nt,
                      ptr(top_logprob_tokens_out, "top_logprob_tokens_out", torch.int32, B * nt),
                      ptr(top_logprob_values_out, "top_logprob_values_out", torch.float32,
                          B * nt), ptr(ranks_out, "ranks_out", torch.int32, n),
                      ptr(target_tokens, "target_tokens", torch.int32, B),
                      ptr(target_logprobs_out, "target_logprobs_out", torch.float32, B),
                      ptr(target_ranks_out, "target_ranks_out", torch.int32, B))
    st = stream if stream is not None else torch.cuda.current_stream(dev)
    if nccl_comm is not None:
        ctx.sample_nccl(p, s, o, nccl_comm, st.cuda_stream, opt)
    else:
        ctx.sample(p, s, o, st.cuda_stream, opt)
    return (tokens, logits) if logits is not None else tokens
