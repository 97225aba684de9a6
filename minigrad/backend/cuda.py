"""The CUDA kernels behind the GPU paths of ``kernels.py``, compiled by CuPy on first use.

Each ``__global__`` function is a template over the element type (float or double) and is
reached as ``function("name", dtype)``. Row-wise kernels give a row (the last axis, made
contiguous) to one block of threads, which reduce through warp shuffles and 32 words of
shared memory. The attention kernels are FlashAttention's tiling (Dao et al., 2022) with
one query (forward, dq) or one key (dk, dv) per thread: a tile of keys and values, or of
queries, is staged in shared memory and every thread walks it, so no (T, S) score matrix
exists anywhere.
"""
from .devices import cupy

SOURCE = r"""
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// ---- reductions over one block: every thread gets the result ------------------------------
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename T> __device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) {
        T u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return v;
}
template <typename T> __device__ T block_sum(T v, T* scratch) {
    v = warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    __syncthreads();                       // scratch may still be read by an earlier call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_sum(lane < warps ? scratch[lane] : (T)0);
}
template <typename T> __device__ T block_max(T v, T* scratch) {
    v = warp_max(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_max(lane < warps ? scratch[lane] : (T)-INFINITY);
}

// ---- layer norm over rows of n: y = (x - mean) / sqrt(var + eps) * w + b -----------------
template <typename T>
__global__ void layer_norm_forward(const T* x, const T* w, const T* b, T* y, int n, T eps,
                                   int has_w, int has_b) {
    __shared__ T scratch[32];
    const T* xr = x + (long long)blockIdx.x * n;
    T* yr = y + (long long)blockIdx.x * n;
    T s = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += xr[j];
    T mean = block_sum(s, scratch) / n;
    T q = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { T d = xr[j] - mean; q += d * d; }
    T rstd = (T)1 / sqrt(block_sum(q, scratch) / n + eps);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        T v = (xr[j] - mean) * rstd;
        if (has_w) v *= w[j];
        if (has_b) v += b[j];
        yr[j] = v;
    }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = grad * w;  gxhat = grad * xhat
template <typename T>
__global__ void layer_norm_backward(const T* grad, const T* x, const T* w, T* dx, T* gxhat,
                                    int n, T eps, int has_w, int want_gxhat) {
    __shared__ T scratch[32];
    long long row = (long long)blockIdx.x * n;
    const T* xr = x + row; const T* gr = grad + row;
    T s = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += xr[j];
    T mean = block_sum(s, scratch) / n;
    T q = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) { T d = xr[j] - mean; q += d * d; }
    T rstd = (T)1 / sqrt(block_sum(q, scratch) / n + eps);
    T sg = 0, sgx = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        T g = has_w ? gr[j] * w[j] : gr[j];
        sg += g; sgx += g * (xr[j] - mean) * rstd;
    }
    T mg = block_sum(sg, scratch) / n;
    T mgx = block_sum(sgx, scratch) / n;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        T xhat = (xr[j] - mean) * rstd;
        T g = has_w ? gr[j] * w[j] : gr[j];
        dx[row + j] = rstd * (g - mg - xhat * mgx);
        if (want_gxhat) gxhat[row + j] = gr[j] * xhat;
    }
}

// ---- softmax and log-softmax over rows of n --------------------------------------------
template <typename T>
__global__ void softmax_forward(const T* x, T* y, int n, int log) {
    __shared__ T scratch[32];
    const T* xr = x + (long long)blockIdx.x * n;
    T* yr = y + (long long)blockIdx.x * n;
    T m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = xr[j] > m ? xr[j] : m;
    m = block_max(m, scratch);
    T s = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += exp(xr[j] - m);
    s = block_sum(s, scratch);
    if (log) {  // (x - max) - log(sum), in that order: exact for large logits
        T logs = ::log(s);
        for (int j = threadIdx.x; j < n; j += blockDim.x) yr[j] = (xr[j] - m) - logs;
    } else {
        for (int j = threadIdx.x; j < n; j += blockDim.x) yr[j] = exp(xr[j] - m) / s;
    }
}

// softmax: dx = y * (g - sum(g * y));  log-softmax: dx = g - exp(y) * sum(g)
template <typename T>
__global__ void softmax_backward(const T* grad, const T* y, T* dx, int n, int log) {
    __shared__ T scratch[32];
    long long row = (long long)blockIdx.x * n;
    const T* gr = grad + row; const T* yr = y + row;
    T s = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += log ? gr[j] : gr[j] * yr[j];
    s = block_sum(s, scratch);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        dx[row + j] = log ? gr[j] - exp(yr[j]) * s : yr[j] * (gr[j] - s);
}

// ---- attention: one (batch, head) per blockIdx.y, BLOCK queries or keys per blockIdx.x ----
// q (H, T, D), k (H, S, D), v (H, S, D); causal < INT_MIN/2 means not causal, else key j is
// visible to query i where j <= i + causal. lse (H, T) is the log of each row's normaliser.
#define BLOCK 64
#define NO_CAUSAL (-2147483647)

template <int D>
__global__ void attention_forward(const float* q, const float* k, const float* v, float* out,
                                  float* lse, int T, int S, float scale, int causal) {
    __shared__ float ks[BLOCK][D];
    __shared__ float vs[BLOCK][D];
    long long h = blockIdx.y;
    int i = blockIdx.x * BLOCK + threadIdx.x;
    bool row = i < T;
    float qi[D], acc[D];
    _Pragma("unroll") for (int d = 0; d < D; ++d) {
        qi[d] = row ? q[(h * T + i) * D + d] * scale : 0.f;
        acc[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    int last = S;                            // keys the block's last query can see
    if (causal != NO_CAUSAL) {
        long long lim = (long long)(blockIdx.x * BLOCK + BLOCK - 1) + causal + 1;
        last = lim < 0 ? 0 : (lim < S ? (int)lim : S);
    }
    for (int j0 = 0; j0 < last; j0 += BLOCK) {
        __syncthreads();
        for (int e = threadIdx.x; e < BLOCK * D; e += blockDim.x) {
            int j = j0 + e / D, d = e % D;
            ks[e / D][d] = j < S ? k[(h * S + j) * D + d] : 0.f;
            vs[e / D][d] = j < S ? v[(h * S + j) * D + d] : 0.f;
        }
        __syncthreads();
        int jn = min(BLOCK, S - j0);
        if (!row) continue;
        for (int jj = 0; jj < jn; ++jj) {
            int j = j0 + jj;
            if (causal != NO_CAUSAL && j > i + causal) break;
            float s = 0.f;
            _Pragma("unroll") for (int d = 0; d < D; ++d) s += qi[d] * ks[jj][d];
            float m_new = s > m ? s : m;
            float corr = expf(m - m_new), p = expf(s - m_new);
            l = l * corr + p;
            _Pragma("unroll") for (int d = 0; d < D; ++d) acc[d] = acc[d] * corr + p * vs[jj][d];
            m = m_new;
        }
    }
    if (!row) return;
    // a row that sees no key gives zeros (PyTorch's _safe_softmax); its lse is +inf
    float inv = l > 0.f ? 1.f / l : 0.f;
    _Pragma("unroll") for (int d = 0; d < D; ++d) out[(h * T + i) * D + d] = acc[d] * inv;
    lse[h * T + i] = l > 0.f ? m + logf(l) : INFINITY;
}

// dq_i = scale * sum_j P_ij (dP_ij - delta_i) k_j,  dP_ij = do_i . v_j,  P_ij = exp(s_ij - lse_i)
template <int D>
__global__ void attention_backward_dq(const float* q, const float* k, const float* v,
                                      const float* dout, const float* lse, const float* delta,
                                      float* dq, int T, int S, float scale, int causal) {
    __shared__ float ks[BLOCK][D];
    __shared__ float vs[BLOCK][D];
    long long h = blockIdx.y;
    int i = blockIdx.x * BLOCK + threadIdx.x;
    bool row = i < T;
    float qi[D], doi[D], acc[D];
    _Pragma("unroll") for (int d = 0; d < D; ++d) {
        qi[d] = row ? q[(h * T + i) * D + d] * scale : 0.f;
        doi[d] = row ? dout[(h * T + i) * D + d] : 0.f;
        acc[d] = 0.f;
    }
    float li = row ? lse[h * T + i] : INFINITY, di = row ? delta[h * T + i] : 0.f;
    int last = S;
    if (causal != NO_CAUSAL) {
        long long lim = (long long)(blockIdx.x * BLOCK + BLOCK - 1) + causal + 1;
        last = lim < 0 ? 0 : (lim < S ? (int)lim : S);
    }
    for (int j0 = 0; j0 < last; j0 += BLOCK) {
        __syncthreads();
        for (int e = threadIdx.x; e < BLOCK * D; e += blockDim.x) {
            int j = j0 + e / D, d = e % D;
            ks[e / D][d] = j < S ? k[(h * S + j) * D + d] : 0.f;
            vs[e / D][d] = j < S ? v[(h * S + j) * D + d] : 0.f;
        }
        __syncthreads();
        int jn = min(BLOCK, S - j0);
        if (!row) continue;
        for (int jj = 0; jj < jn; ++jj) {
            int j = j0 + jj;
            if (causal != NO_CAUSAL && j > i + causal) break;
            float s = 0.f, dp = 0.f;
            _Pragma("unroll") for (int d = 0; d < D; ++d) {
                s += qi[d] * ks[jj][d];
                dp += doi[d] * vs[jj][d];
            }
            float ds = expf(s - li) * (dp - di);
            _Pragma("unroll") for (int d = 0; d < D; ++d) acc[d] += ds * ks[jj][d];
        }
    }
    if (!row) return;
    _Pragma("unroll") for (int d = 0; d < D; ++d) dq[(h * T + i) * D + d] = acc[d] * scale;
}

// dv_j = sum_i P_ij do_i;  dk_j = scale * sum_i P_ij (dP_ij - delta_i) q_i   (WANT_DK picks)
template <int D, int WANT_DK>
__global__ void attention_backward_kv(const float* q, const float* k, const float* v,
                                      const float* dout, const float* lse, const float* delta,
                                      float* dkv, int T, int S, float scale, int causal) {
    __shared__ float qs[BLOCK][D];
    __shared__ float dos[BLOCK][D];
    __shared__ float ls[BLOCK], ds_[BLOCK];
    long long h = blockIdx.y;
    int j = blockIdx.x * BLOCK + threadIdx.x;
    bool col = j < S;
    float kj[D], vj[D], acc[D];
    _Pragma("unroll") for (int d = 0; d < D; ++d) {
        kj[d] = col ? k[(h * S + j) * D + d] * scale : 0.f;
        vj[d] = (WANT_DK && col) ? v[(h * S + j) * D + d] : 0.f;
        acc[d] = 0.f;
    }
    int first = 0;                           // the first query that the block's first key can see
    if (causal != NO_CAUSAL) {
        long long f = (long long)(blockIdx.x * BLOCK) - causal;
        first = f < 0 ? 0 : (f < T ? (int)f : T);
        first -= first % BLOCK;
    }
    for (int i0 = first; i0 < T; i0 += BLOCK) {
        __syncthreads();
        for (int e = threadIdx.x; e < BLOCK * D; e += blockDim.x) {
            int i = i0 + e / D, d = e % D;
            qs[e / D][d] = i < T ? q[(h * T + i) * D + d] : 0.f;
            dos[e / D][d] = i < T ? dout[(h * T + i) * D + d] : 0.f;
        }
        for (int e = threadIdx.x; e < BLOCK; e += blockDim.x) {
            int i = i0 + e;
            ls[e] = i < T ? lse[h * T + i] : INFINITY;
            ds_[e] = i < T ? delta[h * T + i] : 0.f;
        }
        __syncthreads();
        if (!col) continue;
        int in = min(BLOCK, T - i0);
        for (int ii = 0; ii < in; ++ii) {
            int i = i0 + ii;
            if (causal != NO_CAUSAL && j > i + causal) continue;
            float s = 0.f;
            _Pragma("unroll") for (int d = 0; d < D; ++d) s += qs[ii][d] * kj[d];
            float p = expf(s - ls[ii]);
            if (WANT_DK) {
                float dp = 0.f;
                _Pragma("unroll") for (int d = 0; d < D; ++d) dp += dos[ii][d] * vj[d];
                float ds = p * (dp - ds_[ii]);
                _Pragma("unroll") for (int d = 0; d < D; ++d) acc[d] += ds * qs[ii][d];
            } else {
                _Pragma("unroll") for (int d = 0; d < D; ++d) acc[d] += p * dos[ii][d];
            }
        }
    }
    if (!col) return;
    _Pragma("unroll") for (int d = 0; d < D; ++d)
        dkv[(h * S + j) * D + d] = WANT_DK ? acc[d] * scale : acc[d];
}
"""

# Philox4x32-10 (Random123's constants): the i-th 32-bit word of the stream at block
# ``offset`` under ``key``, compared with a threshold to make a dropout mask.
PHILOX_BODY = r"""
unsigned long long blk = offset + (unsigned long long)(i >> 2);
unsigned int c0 = (unsigned int)blk, c1 = (unsigned int)(blk >> 32), c2 = 0u, c3 = 0u;
unsigned int k0 = key0, k1 = key1;
for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
}
unsigned int word = (i & 3) == 0 ? c0 : (i & 3) == 1 ? c1 : (i & 3) == 2 ? c2 : c3;
keep = word >= threshold;
"""

HEAD_DIMS = (16, 32, 64)  # head sizes the attention kernels are built for
_ROW_KERNELS = ("layer_norm_forward", "layer_norm_backward", "softmax_forward",
                "softmax_backward")
_NAMES = [f"{k}<{t}>" for k in _ROW_KERNELS for t in ("float", "double")]
_NAMES += [f"attention_forward<{d}>" for d in HEAD_DIMS]
_NAMES += [f"attention_backward_dq<{d}>" for d in HEAD_DIMS]
_NAMES += [f"attention_backward_kv<{d}, {w}>" for d in HEAD_DIMS for w in (0, 1)]

_module = None
_elementwise = {}
_CTYPE = {"float32": "float", "float64": "double"}


def function(name, dtype=None):
    """The compiled kernel ``name`` (for ``dtype``'s element type when it is a template over
    one), compiling the module on first use."""
    global _module
    if _module is None:
        _module = cupy().RawModule(code=SOURCE, options=("-std=c++17",),
                                   name_expressions=_NAMES)
    return _module.get_function(f"{name}<{_CTYPE[str(dtype)]}>" if dtype is not None else name)


def philox_keep():
    """The elementwise kernel that makes a dropout mask from the Philox stream."""
    if "philox" not in _elementwise:
        _elementwise["philox"] = cupy().ElementwiseKernel(
            "uint32 key0, uint32 key1, uint64 offset, uint32 threshold", "bool keep",
            PHILOX_BODY, "minigrad_philox_keep")
    return _elementwise["philox"]
