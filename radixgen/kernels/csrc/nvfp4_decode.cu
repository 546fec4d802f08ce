// NVFP4 paged decode attention for NVIDIA sm_89+ (written for Hopper), compiled at run time by
// NVRTC (nvfp4_decode_cuda.py), with no headers: every device intrinsic is inline PTX.
//
// Each (KV head, request, split) program is one warp. It walks its split's tokens in tiles of 32
// and keeps an online softmax, like decode_tile.py, but with the MMA operands chosen so that the
// dequantize costs about two instructions per value (the Triton kernel spends about six per value
// on dequantize, block-scale broadcast and layout shuffles; docs/benchmarks-history.md counts them):
//   scores  S^T [tokens x q heads] = K [tokens x D] . Q^T  (m16n8k16: 16 tokens, the GQA group
//           padded to 8 columns, 16 values of D per step), so the 4-8 query heads of a KV head
//           waste at most half an MMA instead of three quarters;
//   output  O^T [D x q heads] = V^T [D x tokens] . P^T, P^T taken from S^T's accumulators by
//           movmatrix (an 8x8 transpose in registers).
// An MMA's reduction index is only a label: each thread owns the same k slots in A and B, so a
// thread's K operand can be any D values of its token if its Q operand holds the same ones. So
// thread c of a quad reads one contiguous run of D/4 values (D/8 code bytes) of a key row, and
// thread g of V's operand (the D rows of O^T, also free labels) one run of D/8 values, written
// back to their places at the end.
//
// Codes to fp16: a nibble s.e1.e0.m placed as an E4M3 byte s.0.0.e1.e0.m.0.0 is exactly
// e2m1 * 2^-6, and cvt.rn.f16x2.e4m3x2 converts two such bytes at once. Three logic ops place the
// four high nibbles of a word, four the low ones; one cvt per pair; one fp16 multiply by the block
// scale per pair (exact: e2m1 * 2^-6 * E4M3 has at most 5 significant bits, >= 2^-16).
// K raw = e2m1 * bscale * 2^-6; the factor s_T * 2^6 * sm_scale * log2(e) goes into q in fp32, and
// a power of two c per query head puts |q| in [256, 512) before its one rounding to fp16 (as the
// Triton kernels' prepare_q_rows). V raw likewise; o = acc * s_T(v) * 2^6 / l.
//
// Two ways to bring a tile's bytes in, chosen by STAGES:
//   STAGES 0, "registers": each warp is its own CTA and loads its head's rows straight into
//     registers, the next tile's while it computes this one. A token's codes for one head are a
//     64-byte row (D 128) and its scales an 8-byte row, at a random slot: fetches that small reach
//     a fraction of the copy bandwidth (docs/benchmarks-history.md: random 64-byte rows 2.68 TB/s, 32-byte
//     ones 1.36, 512-byte ones 4.45 on an H200).
//   STAGES >= 2, "staged": a CTA holds the HC KV heads that share a (request, split) and copies
//     each token's codes and scales for all of them, HC contiguous rows of the slot (512 bytes at
//     D 128 and 8 heads), into shared memory by cp.async, STAGES - 1 tiles ahead; each warp then
//     reads its head's part. Chunks are placed XOR-swizzled so that both read patterns (key rows
//     g, g+8, ...; value rows 2c, 2c+1, ...) hit distinct banks.
//
// Compile-time constants (-D): HEAD_DIM (64, 128, 256), GROUP (query heads per KV head, <= 8),
// HKV (KV heads), Q_BF16 (q is bf16, else fp16), OUT_KIND (0 fp32, 1 fp16, 2 bf16 output),
// INDPTR64 / INDICES64 (int64 index tensors), STAGES; for STAGES 0 WARPS (programs per CTA) and
// MIN_WARPS (occupancy hint); for STAGES >= 2 HC (KV heads per CTA, a power of two dividing HKV),
// MIN_CTAS (occupancy hint) and SMEM_BYTES (the dynamic shared memory the launcher gives).

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef long long i64;

#define D HEAD_DIM
#define KW (D / 32)      // 32-bit code words of one key row per quad thread (D/4 values)
#define VW (D / 64)      // code words of one value row per thread row g (D/8 values)
#define MT (D / 16)      // m16 tiles of O^T, k16 steps of S^T
#define TILE 32          // tokens per tile
#define ROW_BYTES (D / 2)
#define SCALE_BYTES (D / 16)

#if INDPTR64
typedef i64 indptr_t;
#else
typedef int indptr_t;
#endif
#if INDICES64
typedef i64 index_t;
#else
typedef int index_t;
#endif

// ---------------------------------------------------------------- PTX helpers

__device__ __forceinline__ u32 shfl_xor(u32 v, int m) {
    u32 r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(m));
    return r;
}
__device__ __forceinline__ float shfl_xor_f(float v, int m) {
    return __int_as_float(shfl_xor(__float_as_int(v), m));
}
__device__ __forceinline__ u32 shfl_idx(u32 v, int lane) {
    u32 r;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(lane));
    return r;
}
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
    u32 r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}
// two E4M3 bytes (the low 16 bits of w: lo, the high 16 bits: hi) to two fp16 pairs
__device__ __forceinline__ void e4m3x4_to_f16(u32 w, u32 &lo, u32 &hi) {
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}"
        : "=r"(lo), "=r"(hi) : "r"(w));
}
__device__ __forceinline__ u32 hmul2(u32 a, u32 b) {
    u32 r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
__device__ __forceinline__ u32 pack_f16(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float ex2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float lg2(float x) {
    float r;
    asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ u32 movmatrix_t(u32 x) {
    u32 r;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(r) : "r"(x));
    return r;
}
__device__ __forceinline__ void mma16816(float *c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The high nibbles of w's four bytes as E4M3 bytes (hi) and the low ones (lo), each e2m1 * 2^-6.
__device__ __forceinline__ void nibbles_to_e4m3(u32 w, u32 &lo, u32 &hi) {
    hi = (w & 0x80808080u) | ((w >> 2) & 0x1C1C1C1Cu);
    lo = ((w << 4) & 0x80808080u) | ((w << 2) & 0x1C1C1C1Cu);
}

// Loads of N bytes (4, 8, 16 or 32) into N/4 words. Read-only, streamed past L1.
template <int N>
__device__ __forceinline__ void load_words(const unsigned char *p, u32 *w) {
    if (N == 4) {
        asm("ld.global.nc.L1::no_allocate.b32 %0, [%1];" : "=r"(w[0]) : "l"(p));
    } else if (N == 8) {
        asm("ld.global.nc.L1::no_allocate.v2.b32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
    } else {
#pragma unroll
        for (int i = 0; i < N / 16; ++i)
            asm("ld.global.nc.L1::no_allocate.v4.b32 {%0, %1, %2, %3}, [%4];"
                : "=r"(w[4 * i]), "=r"(w[4 * i + 1]), "=r"(w[4 * i + 2]), "=r"(w[4 * i + 3])
                : "l"(p + 16 * i));
    }
}
// N scale bytes (1, 2 or 4) at p, in the low bytes of a word.
template <int N>
__device__ __forceinline__ u32 load_scales(const unsigned char *p) {
    u32 r;
    if (N == 1) {
        asm("ld.global.nc.u8 %0, [%1];" : "=r"(r) : "l"(p));
    } else if (N == 2) {
        u16 h;
        asm("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
        r = h;
    } else {
        asm("ld.global.nc.b32 %0, [%1];" : "=r"(r) : "l"(p));
    }
    return r;
}

// cp.async of N bytes (4, 8 or 16) from global to a shared address; 16 bypasses L1
template <int N>
__device__ __forceinline__ void cp_async(u32 dst, const void *src) {
    if (N == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(src), "n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void barrier() { asm volatile("bar.sync 0;" ::: "memory"); }
__device__ __forceinline__ u32 shared_addr(const void *p) {
    u32 r;
    asm("{\n.reg .u64 a;\ncvta.to.shared.u64 a, %1;\ncvt.u32.u64 %0, a;\n}" : "=r"(r) : "l"(p));
    return r;
}
// N bytes (4, 8, 16 or 32) of shared memory at a into N/4 words
template <int N>
__device__ __forceinline__ void lds_words(u32 a, u32 *w) {
    if (N == 4) {
        asm volatile("ld.shared.b32 %0, [%1];" : "=r"(w[0]) : "r"(a));
    } else if (N == 8) {
        asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "r"(a));
    } else {
#pragma unroll
        for (int i = 0; i < N / 16; ++i)
            asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(w[4 * i]), "=r"(w[4 * i + 1]), "=r"(w[4 * i + 2]), "=r"(w[4 * i + 3])
                         : "r"(a + 16 * i));
    }
}
// N scale bytes (1, 2 or 4) of shared memory at a, in the low bytes of a word
template <int N>
__device__ __forceinline__ u32 lds_scales(u32 a) {
    u32 r;
    if (N == 1) {
        asm volatile("ld.shared.u8 %0, [%1];" : "=r"(r) : "r"(a));
    } else if (N == 2) {
        u16 h;
        asm volatile("ld.shared.u16 %0, [%1];" : "=h"(h) : "r"(a));
        r = h;
    } else {
        asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r) : "r"(a));
    }
    return r;
}

// The raw bits of one tile, as this thread needs them. Tokens past the split's end read the
// split.s last key (its slot is valid and its values finite) and are masked in the scores.
struct Tile {
    u32 k[4][KW];       // key rows of tokens g, g+8, g+16, g+24: bytes [c*D/8, (c+1)*D/8)
    u32 ks[4];          // their block scales: blocks [c*D/64, (c+1)*D/64)
    u32 v[8][VW];       // value rows of tokens 2c, 2c+1, 2c+8, 2c+9 and those + 16: bytes [g*D/16, (g+1)*D/16)
    u32 vs[8];          // their block scales
};

__device__ __forceinline__ int v_token(int i, int c) {  // i-th value token of thread quad column c
    return (i >> 2) * 16 + ((i >> 1) & 1) * 8 + 2 * c + (i & 1);
}

// Base pointers already hold the head's and the thread's offsets; a slot moves them by whole slots.
__device__ __forceinline__ void load_tile(Tile &t, u32 slot_lane, int g, int c, const unsigned char *kq,
                                          const unsigned char *vq, const unsigned char *kbq,
                                          const unsigned char *vbq) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const u32 slot = shfl_idx(slot_lane, g + 8 * i);
        load_words<D / 8>(kq + (u64)slot * (HKV * ROW_BYTES), t.k[i]);
        t.ks[i] = load_scales<D / 64>(kbq + (u64)slot * (HKV * SCALE_BYTES));
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const u32 slot = shfl_idx(slot_lane, v_token(i, c));
        load_words<D / 16>(vq + (u64)slot * (HKV * ROW_BYTES), t.v[i]);
        t.vs[i] = load_scales<(D >= 128 ? D / 128 : 1)>(vbq + (u64)slot * (HKV * SCALE_BYTES));
    }
}

// fp16 pairs (s, s) of the block scale of key word i (D/64 blocks per thread, two words each)
__device__ __forceinline__ u32 key_scale(u32 bytes, int i) {
    u32 lo, hi;
    int blk = i / 2;  // block within the thread's run
    u32 b = prmt(bytes, 0, (blk & 3) * 0x1111u);  // that byte in all four places
    e4m3x4_to_f16(b, lo, hi);
    return lo;
}

// ---------------------------------------------------------------- the math of one program

#define KSB (D / 64)                  // key scale bytes per thread: blocks of its D/4 values
#define VSB (D >= 128 ? D / 128 : 1)  // value scale bytes per thread: blocks of its D/8 values

// Online softmax state of one program: O^T accumulators, running max and sum per column.
struct Softmax {
    float acc[MT][4];
    float m[2];
    float l[2];
};

// q as the B operand: thread (g, c) holds query head g's values [c*D/4, (c+1)*D/4), scaled into
// [256, 512) by a power of two per head; km0 / km1 undo it for this thread's score columns. NVFP4
// keys pair values (0, 2), (1, 3) of each 4 in a k-step (a word's low and high nibbles), FP8 keys
// (0, 1), (2, 3) (a word's bytes); the key factor is s_T * 2^6 for NVFP4, the head's scale for FP8.
template <bool FP8>
__device__ __forceinline__ void prepare_q(const void *q_ptr, const float *kf, float scale_log2, int b, int h, int g,
                                          int c, u32 (&qb)[MT][2], float &km0, float &km1) {
    const float factor = kf[h] * (FP8 ? 1.0f : 64.0f) * scale_log2;
    float qv[D / 4];
    if (g < GROUP) {
        const u16 *qp = (const u16 *)q_ptr + ((i64)b * (HKV * GROUP) + h * GROUP + g) * D + c * (D / 4);
#pragma unroll
        for (int i = 0; i < D / 4; ++i) {
            u16 bits = qp[i];
#if Q_BF16
            qv[i] = __int_as_float((u32)bits << 16);
#else
            float f;
            asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
            qv[i] = f;
#endif
            qv[i] *= factor;
        }
    } else {
#pragma unroll
        for (int i = 0; i < D / 4; ++i) qv[i] = 0.0f;
    }
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 4; ++i) amax = fmaxf(amax, fabsf(qv[i]));
    amax = fmaxf(amax, shfl_xor_f(amax, 1));
    amax = fmaxf(amax, shfl_xor_f(amax, 2));
    const int e = (__float_as_int(amax) >> 23) & 0xFF;
    const int ce = min(max(262 - e, 1), 253);  // c = 2^(135 - e): |q * c| in [256, 512)
    const float cq = __int_as_float(ce << 23);
    const float kmult = __int_as_float((254 - ce) << 23);  // 1 / c of query head g
#pragma unroll
    for (int i = 0; i < KW; ++i) {  // word i: values 8i .. 8i+7 of the run; steps 2i, 2i+1
        const float *x = qv + 8 * i;
        if (FP8) {
#pragma unroll
            for (int z = 0; z < 4; ++z) qb[2 * i + z / 2][z & 1] = pack_f16(x[2 * z] * cq, x[2 * z + 1] * cq);
            continue;
        }
        qb[2 * i][0] = pack_f16(x[0] * cq, x[2] * cq);
        qb[2 * i][1] = pack_f16(x[1] * cq, x[3] * cq);
        qb[2 * i + 1][0] = pack_f16(x[4] * cq, x[6] * cq);
        qb[2 * i + 1][1] = pack_f16(x[5] * cq, x[7] * cq);
    }
    // score multipliers of this thread's two columns (query heads 2c, 2c+1)
    km0 = __int_as_float(shfl_idx(__float_as_int(kmult), 8 * c));
    km1 = __int_as_float(shfl_idx(__float_as_int(kmult), 8 * c + 4));
}

__device__ __forceinline__ void softmax_init(Softmax &st) {
#pragma unroll
    for (int j = 0; j < MT; ++j) st.acc[j][0] = st.acc[j][1] = st.acc[j][2] = st.acc[j][3] = 0.0f;
    st.m[0] = st.m[1] = -__int_as_float(0x7f800000);
    st.l[0] = st.l[1] = 0.0f;
}

// The online softmax over NM m-tiles of scores S^T (16 tokens each; m-tile mt holds tokens
// 16mt + g (rows c0, c1) and 16mt + g + 8 (c2, c3)), in log2 units per column: the running max
// moves only when a column's max grew by more than 2^8, so p <= 256 (fine in fp16) and most tiles
// skip the rescale. The first n_valid tokens are keys, the rest masked. Leaves P^T as the B
// operand of k-step mt in pb[mt]: tokens 16mt + 2c, +1 (b0) and +8 (b1).
template <int NM>
__device__ __forceinline__ void softmax_step(float (&s)[NM][4], int n_valid, float km0, float km1, Softmax &st,
                                             int g, u32 (&pb)[NM][2]) {
    float mx[2];
#pragma unroll
    for (int col = 0; col < 2; ++col) {
        const float km = col ? km1 : km0;
        float m = -__int_as_float(0x7f800000);
#pragma unroll
        for (int mt = 0; mt < NM; ++mt) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int tok = 16 * mt + 8 * r + g;
                float x = s[mt][2 * r + col] * km;
                x = (tok < n_valid) ? x : -__int_as_float(0x7f800000);
                s[mt][2 * r + col] = x;
                m = fmaxf(m, x);
            }
        }
        m = fmaxf(m, shfl_xor_f(m, 4));
        m = fmaxf(m, shfl_xor_f(m, 8));
        m = fmaxf(m, shfl_xor_f(m, 16));
        mx[col] = m;
    }
#pragma unroll
    for (int col = 0; col < 2; ++col) {
        if (mx[col] > st.m[col] + 8.0f) {
            const float alpha = ex2(st.m[col] - mx[col]);
            st.l[col] *= alpha;
#pragma unroll
            for (int j = 0; j < MT; ++j) {
                st.acc[j][col] *= alpha;
                st.acc[j][col + 2] *= alpha;
            }
            st.m[col] = mx[col];
        }
    }
#pragma unroll
    for (int mt = 0; mt < NM; ++mt) {
        float p[4];
#pragma unroll
        for (int z = 0; z < 4; ++z) {
            p[z] = ex2(s[mt][z] - st.m[z & 1]);
            st.l[z & 1] += p[z];
        }
        pb[mt][0] = movmatrix_t(pack_f16(p[0], p[1]));
        pb[mt][1] = movmatrix_t(pack_f16(p[2], p[3]));
    }
}

// One tile: scores, the online softmax update and O^T += V^T P^T. The first n_valid tokens of the
// tile are keys; the rest are masked out of the scores.
__device__ __forceinline__ void tile_math(const Tile &cur, int n_valid, const u32 (&qb)[MT][2], float km0, float km1,
                                          Softmax &st, int g) {
    // ---- scores S^T: m-tile mt holds tokens 16mt + g (rows c0, c1) and 16mt + g + 8 (c2, c3)
    float s[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
        s[mt][0] = s[mt][1] = s[mt][2] = s[mt][3] = 0.0f;
#pragma unroll
        for (int i = 0; i < KW; ++i) {
            u32 fa[2][4];  // [row g, row g+8][L01, L23, H01, H23]
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const u32 scale = key_scale(cur.ks[2 * mt + r], i);
                u32 lo, hi;
                nibbles_to_e4m3(cur.k[2 * mt + r][i], lo, hi);
                e4m3x4_to_f16(lo, fa[r][0], fa[r][1]);
                e4m3x4_to_f16(hi, fa[r][2], fa[r][3]);
#pragma unroll
                for (int z = 0; z < 4; ++z) fa[r][z] = hmul2(fa[r][z], scale);
            }
            mma16816(s[mt], fa[0][0], fa[1][0], fa[0][2], fa[1][2], qb[2 * i][0], qb[2 * i][1]);
            mma16816(s[mt], fa[0][1], fa[1][1], fa[0][3], fa[1][3], qb[2 * i + 1][0], qb[2 * i + 1][1]);
        }
    }
    u32 pb[2][2];  // P^T as the B operand of k-step mt: tokens 16mt + 2c, +1 (b0) and +8 (b1)
    softmax_step<2>(s, n_valid, km0, km1, st, g, pb);
    // ---- O^T += V^T P^T: m-tile j holds byte j of thread g's run: its low nibble (row g), high (row g+8)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
        u32 sp[2][2];  // fp16 (scale of token A, of token B) of pair 0 / 1, per block of the run
#pragma unroll
        for (int pr = 0; pr < 2; ++pr) {
            const u32 a = cur.vs[4 * mt + 2 * pr], bb = cur.vs[4 * mt + 2 * pr + 1];
            u32 x0, x1;
            e4m3x4_to_f16(prmt(a, bb, 0x5140u), x0, x1);  // (A0, B0), (A1, B1)
            sp[pr][0] = x0;
            sp[pr][1] = x1;
        }
#pragma unroll
        for (int i = 0; i < VW; ++i) {
            const int blk = (D >= 256) ? (i >> 1) : 0;
#pragma unroll
            for (int half = 0; half < 2; ++half) {  // bytes 4i + 2half, 4i + 2half + 1
                u32 f[2][4];  // [pair][L byte0, L byte1, H byte0, H byte1]
#pragma unroll
                for (int pr = 0; pr < 2; ++pr) {
                    const u32 wa = cur.v[4 * mt + 2 * pr][i], wb = cur.v[4 * mt + 2 * pr + 1][i];
                    const u32 x = prmt(wa, wb, half ? 0x7362u : 0x5140u);
                    u32 lo, hi;
                    nibbles_to_e4m3(x, lo, hi);
                    e4m3x4_to_f16(lo, f[pr][0], f[pr][1]);
                    e4m3x4_to_f16(hi, f[pr][2], f[pr][3]);
#pragma unroll
                    for (int z = 0; z < 4; ++z) f[pr][z] = hmul2(f[pr][z], sp[pr][blk]);
                }
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int j = 4 * i + 2 * half + e;
                    mma16816(st.acc[j], f[0][e], f[0][2 + e], f[1][e], f[1][2 + e], pb[mt][0], pb[mt][1]);
                }
            }
        }
    }
}

// Epilogue: column sums over the tokens of all rows, then o = acc * vfac / l (vfac: s_T(v) * 2^6
// for NVFP4, the head's scale for FP8) and the lse (-inf for an empty split) at split_base + split
// of split_stride.
__device__ __forceinline__ void write_output(const Softmax &st, float vfac, int h, int b, int g, int c,
                                             void *o_ptr, float *lse_ptr, int split_base, int split,
                                             int split_stride) {
#pragma unroll
    for (int col = 0; col < 2; ++col) {
        float l = st.l[col];
        l += shfl_xor_f(l, 4);
        l += shfl_xor_f(l, 8);
        l += shfl_xor_f(l, 16);
        const int qcol = 2 * c + col;
        if (qcol >= GROUP) continue;
        const bool nonempty = l > 0.0f;
        const float mult = vfac / (nonempty ? l : 1.0f);
        const i64 row = ((i64)b * (HKV * GROUP) + h * GROUP + qcol) * split_stride + split_base + split;
        const int d0 = g * (D / 8);
#if OUT_KIND == 0
        float *o = (float *)o_ptr + row * D + d0;
#pragma unroll
        for (int j = 0; j < MT; ++j) {
            o[2 * j] = st.acc[j][col] * mult;
            o[2 * j + 1] = st.acc[j][col + 2] * mult;
        }
#else
        u32 *o = (u32 *)((u16 *)o_ptr + row * D + d0);
#pragma unroll
        for (int j = 0; j < MT; ++j) {
            const float x0 = st.acc[j][col] * mult, x1 = st.acc[j][col + 2] * mult;
            u32 r;
#if OUT_KIND == 1
            asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
#else
            asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
#endif
            o[j] = r;
        }
#endif
        if (g == 0)
            lse_ptr[row] = nonempty ? (st.m[col] + lg2(l)) * 0.6931471805599453f : -__int_as_float(0x7f800000);
    }
}

// What a program knows before its first tile: its split's token range [lo, hi) of request b
// (splits of whole tiles of T tokens) and that request's slots, q as the B operand, the softmax state.
struct Program {
    int lo, hi;
    const index_t *idx;
    u32 qb[MT][2];
    float km0, km1;
    Softmax st;
};

// Split `split` of num_splits of request b's tokens (splits of whole tiles of T tokens): [lo, hi)
// of its slots idx.
template <int T>
__device__ __forceinline__ void split_range(const indptr_t *indptr, const index_t *indices, int b, int split,
                                            int num_splits, int &lo, int &hi, const index_t *&idx) {
    const i64 start = (i64)indptr[b];
    const int length = (int)((i64)indptr[b + 1] - start);
    const int per_split = (length + num_splits - 1) / num_splits;
    const int chunk = (per_split + T - 1) / T * T;
    lo = split * chunk;
    hi = min(length, lo + chunk);
    idx = indices + start;
}

__device__ __forceinline__ void allow_dependents() {
#if __CUDA_ARCH__ >= 900
    // programmatic dependent launch: the launch after this one (the split reduce, another pool's
    // decode) may place its CTAs beside this launch's last ones (decode_attention.py)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <int T, bool FP8>
__device__ __forceinline__ void begin_program(Program &p, const void *q_ptr, const float *kf, float scale_log2,
                                              const indptr_t *indptr, const index_t *indices, int b, int h,
                                              int split, int num_splits, int g, int c) {
    allow_dependents();
    split_range<T>(indptr, indices, b, split, num_splits, p.lo, p.hi, p.idx);
    prepare_q<FP8>(q_ptr, kf, scale_log2, b, h, g, c, p.qb, p.km0, p.km1);
    softmax_init(p.st);
}

#define KERNEL_ARGS                                                                                              \
    const void *__restrict__ q_ptr, const unsigned char *__restrict__ k, const unsigned char *__restrict__ v,    \
        const unsigned char *__restrict__ kb, const unsigned char *__restrict__ vb, const float *__restrict__ kf, \
        const float *__restrict__ vf, const indptr_t *__restrict__ indptr, const index_t *__restrict__ indices,  \
        void *__restrict__ o_ptr, float *__restrict__ lse_ptr, float scale_log2, int batch, int split_base,      \
        int num_splits, int split_stride

#if STAGES == 0
// ---------------------------------------------------------------- registers: one warp per CTA

extern "C" __global__ void __launch_bounds__(32 * WARPS, MIN_WARPS / WARPS) nvfp4_decode(KERNEL_ARGS) {
    const int lane = threadIdx.x & 31;
    const int prog = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (prog >= HKV * batch * num_splits) return;
    const int h = prog % HKV;
    const int b = (prog / HKV) % batch;
    const int split = prog / (HKV * batch);
    const int g = lane >> 2, c = lane & 3;
    Program p;
    begin_program<TILE, false>(p, q_ptr, kf, scale_log2, indptr, indices, b, h, split, num_splits, g, c);
    const int lo = p.lo, hi = p.hi;
    const index_t *idx = p.idx;

    const int n_tiles = hi > lo ? (hi - lo + TILE - 1) / TILE : 0;
    const unsigned char *kq = k + h * ROW_BYTES + c * (D / 8);
    const unsigned char *vq = v + h * ROW_BYTES + g * (D / 16);
    const unsigned char *kbq = kb + h * SCALE_BYTES + c * (D / 64);
    const unsigned char *vbq = vb + h * SCALE_BYTES + (g * (D / 8)) / 16;
    // slot of token lane of the tile at t0 (a token past the end reads the split's last key)
    auto slot_of = [&](int t0) -> u32 { return (u32)idx[min(t0 + lane, hi - 1)]; };
    Tile tile_a, tile_b;
    u32 slot_next = 0;
    if (n_tiles > 0) {
        load_tile(tile_a, slot_of(lo), g, c, kq, vq, kbq, vbq);
        if (n_tiles > 1) slot_next = slot_of(lo + TILE);
    }
    // one tile: issue the next tile's loads (and the slots of the one after), then the math
    auto step = [&](const Tile &cur, Tile &nxt, int t) {
        const int t0 = lo + t * TILE;
        if (t + 1 < n_tiles) {
            load_tile(nxt, slot_next, g, c, kq, vq, kbq, vbq);
            if (t + 2 < n_tiles) slot_next = slot_of(t0 + 2 * TILE);
        }
        tile_math(cur, hi - t0, p.qb, p.km0, p.km1, p.st, g);
    };
    for (int t = 0; t < n_tiles; t += 2) {  // two tiles per pass: the buffers swap roles, no copies
        step(tile_a, tile_b, t);
        if (t + 1 < n_tiles) step(tile_b, tile_a, t + 1);
    }
    write_output(p.st, vf[h] * 64.0f, h, b, g, c, o_ptr, lse_ptr, split_base, split, split_stride);
}

#else
// ---------------------------------------------------------------- staged: HC heads per CTA, shared memory

#define CODE_ROW (HC * ROW_BYTES)   // bytes of one token's codes for the CTA's heads
#define CPR (CODE_ROW / 16)         // 16-byte chunks per code row (a power of two)
#define SCALE_ROW (HC * SCALE_BYTES)
#define SCALE_CHUNK (SCALE_ROW >= 16 ? 16 : SCALE_ROW)
#define SPR (SCALE_ROW / SCALE_CHUNK)                             // chunks per scale row
#define SCALE_PITCH (SCALE_ROW >= 16 ? SCALE_ROW + 16 : SCALE_ROW)  // padded: rows g, g+1.. on other banks
// one stage: key codes [TILE][CODE_ROW], value codes, key scales [TILE][SCALE_PITCH], value scales
#define STAGE_BYTES (2 * TILE * CODE_ROW + 2 * TILE * SCALE_PITCH)
static_assert(HKV % HC == 0 && (CPR & (CPR - 1)) == 0, "HC must be a power of two dividing HKV");

// Chunk j of a token's code row is stored at chunk j ^ swizzle(token). Keys are read by rows g and
// g+1 in one phase (flip bit 2: the other half of a 128-byte line), values by rows 2c (+1) for c
// 0..3 (flip bits 1-2 by c).
__device__ __forceinline__ int k_swizzle(int tok) { return ((tok & 1) << 2) & (CPR - 1); }
__device__ __forceinline__ int v_swizzle(int tok) { return (((tok >> 1) & 3) << 1) & (CPR - 1); }

// ---------------------------------------------------------------- the FP8 part of a mixed launch
// With FP8_PART the kernel also attends an FP8 (E4M3) pool: its first CTAs take that pool's
// (request, split)s, the others the NVFP4 pool's, so a sequence split between an FP8 prefix pool and
// an NVFP4 branch pool costs one launch (one ramp and one tail instead of two). An FP8 value is
// one code byte, exact in fp16 by cvt, with no block scale: raw = the E4M3 value, and the head's
// scale goes into q (keys) and the epilogue (values). A token's row for HC heads is HC * D bytes,
// twice NVFP4's, so an FP8 stage holds 16 tokens (one m16 tile of S^T): two stages then fit
// beside the NVFP4 part's two CTAs per SM.
#define TILE8 16
#define CODE_ROW8 (HC * D)
#define CPR8 (CODE_ROW8 / 16)
#define STAGE8_BYTES (2 * TILE8 * CODE_ROW8)
#if FP8_PART
#define STAGE_SPACE (STAGE8_BYTES > STAGE_BYTES ? STAGE8_BYTES : STAGE_BYTES)
#else
#define STAGE_SPACE STAGE_BYTES
#endif
static_assert(SMEM_BYTES == STAGES * STAGE_SPACE, "the launcher's shared memory size disagrees");

// Swizzles of FP8 code rows (16-byte chunk ch of token tok's row at ch ^ swizzle), so that the
// reads of a quarter warp hit distinct banks. Keys: thread (g, c) reads rows g and g + 8, D/4
// bytes from c * D/4 (a quarter warp: rows 2p, 2p + 1, c = 0..3). Values: rows 2c, 2c + 1,
// 2c + 8, 2c + 9, D/8 bytes from g * D/8 (a quarter warp: rows 2c + x, g = 2p, 2p + 1).
__device__ __forceinline__ int k8_swizzle(int tok, int ch) {
#if D == 64
    const int f = (tok & 1) << 2;
#elif D == 128
    const int f = tok & 1;
#else
    const int f = (((ch >> 3) & 1) << 1) | (tok & 1);
#endif
    return f & (CPR8 - 1);
}
__device__ __forceinline__ int v8_swizzle(int tok) {
#if D <= 128
    const int f = ((tok >> 1) & 3) << 1;
#else
    const int f = ((tok >> 1) & 1) | (((tok >> 2) & 1) << 2);
#endif
    return f & (CPR8 - 1);
}

// Copy the code rows of a tile of T tokens (C 16-byte chunks a token: keys, then values) whose
// token `lane` is at slot slot_lane (every warp holds them all) into a stage, chunk ch of token
// tok's row at ch ^ its swizzle: each warp instruction copies whole code rows, 32 chunks.
template <int T, int C, bool FP8>
__device__ __forceinline__ void copy_code_rows(u32 stage, u32 slot_lane, int warp, int lane, const unsigned char *kg,
                                               const unsigned char *vg) {
#pragma unroll
    for (int n = 0; n < 2 * T * C / (32 * HC); ++n) {
        const int j = (n * HC + warp) * 32 + lane;
        const int is_v = j >= T * C;
        const int r = j - is_v * (T * C);
        const int tok = r / C, ch = r % C;
        const u32 slot = shfl_idx(slot_lane, tok);
        const unsigned char *src = (is_v ? vg : kg) + (u64)slot * (HKV * (FP8 ? D : ROW_BYTES)) + ch * 16;
        int sw;
        if constexpr (FP8)
            sw = is_v ? v8_swizzle(tok) : k8_swizzle(tok, ch);
        else
            sw = is_v ? v_swizzle(tok) : k_swizzle(tok);
        cp_async<16>(stage + is_v * (T * C * 16) + tok * (C * 16) + (ch ^ sw) * 16, src);
    }
}

// Copy the tile whose token `lane` is at slot slot_lane (every warp holds them all) into a stage:
// its code rows, then its scale rows.
__device__ __forceinline__ void issue_tile(u32 stage, u32 slot_lane, int warp, int lane, const unsigned char *kg,
                                           const unsigned char *vg, const unsigned char *kbg,
                                           const unsigned char *vbg) {
    copy_code_rows<TILE, CPR, false>(stage, slot_lane, warp, lane, kg, vg);
    const u32 scales = stage + 2 * TILE * CODE_ROW;
    for (int base = warp * 32; base < 2 * TILE * SPR; base += 32 * HC) {  // warp-uniform bounds
        const int j = base + lane;
        const int is_v = j >= TILE * SPR;
        const int r = j - is_v * (TILE * SPR);
        const int tok = (r / SPR) & (TILE - 1), ch = r % SPR;
        const u32 slot = shfl_idx(slot_lane, tok);
        if (j < 2 * TILE * SPR) {
            const unsigned char *src = (is_v ? vbg : kbg) + (u64)slot * (HKV * SCALE_BYTES) + ch * SCALE_CHUNK;
            cp_async<SCALE_CHUNK>(scales + is_v * (TILE * SCALE_PITCH) + tok * SCALE_PITCH + ch * SCALE_CHUNK, src);
        }
    }
}

// Read this warp's head's part of a stage into the registers load_tile fills.
__device__ __forceinline__ void read_tile(Tile &t, u32 stage, int warp, int g, int c) {
    const u32 kc = stage, vc = stage + TILE * CODE_ROW;
    const u32 ks = stage + 2 * TILE * CODE_ROW, vs = ks + TILE * SCALE_PITCH;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int tok = g + 8 * i;
        const int off = warp * ROW_BYTES + c * (D / 8);
#pragma unroll
        for (int p = 0; p < (D / 8 + 15) / 16; ++p) {  // 16-byte pieces (one piece of 8 bytes at D 64)
            const int o = off + 16 * p;
            lds_words<(D / 8 < 16 ? D / 8 : 16)>(kc + tok * CODE_ROW + ((o >> 4) ^ k_swizzle(tok)) * 16 + (o & 15),
                                                 t.k[i] + 4 * p);
        }
        t.ks[i] = lds_scales<KSB>(ks + tok * SCALE_PITCH + warp * SCALE_BYTES + c * KSB);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int tok = v_token(i, c);
        const int o = warp * ROW_BYTES + g * (D / 16);
        lds_words<D / 16>(vc + tok * CODE_ROW + ((o >> 4) ^ v_swizzle(tok)) * 16 + (o & 15), t.v[i]);
        t.vs[i] = lds_scales<VSB>(vs + tok * SCALE_PITCH + warp * SCALE_BYTES + (g * (D / 8)) / 16);
    }
}

// ---------------------------------------------------------------- the FP8 part's tiles

struct Tile8 {
    u32 k[2][D / 16];  // key rows of tokens g, g+8: bytes [c*D/4, (c+1)*D/4)
    u32 v[4][D / 32];  // value rows of tokens 2c, 2c+1, 2c+8, 2c+9: bytes [g*D/8, (g+1)*D/8)
};

__device__ __forceinline__ void read_tile8(Tile8 &t, u32 stage, int warp, int g, int c) {
    const u32 kc = stage, vc = stage + TILE8 * CODE_ROW8;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int tok = g + 8 * r;
#pragma unroll
        for (int p = 0; p < D / 64; ++p) {  // D/4 bytes in 16-byte pieces
            const int ch = (warp * D + c * (D / 4)) / 16 + p;
            lds_words<16>(kc + tok * CODE_ROW8 + (ch ^ k8_swizzle(tok, ch)) * 16, t.k[r] + 4 * p);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int tok = (i >> 1) * 8 + 2 * c + (i & 1);
#pragma unroll
        for (int p = 0; p < (D / 8 + 15) / 16; ++p) {  // 16-byte pieces (one of 8 bytes at D 64)
            const int o = warp * D + g * (D / 8) + 16 * p;
            lds_words<(D / 8 < 16 ? D / 8 : 16)>(vc + tok * CODE_ROW8 + ((o >> 4) ^ v8_swizzle(tok)) * 16 + (o & 15),
                                                 t.v[i] + 4 * p);
        }
    }
}

// One 16-token FP8 tile: S^T by D/16 k-steps of the thread's 4 key values each (q packed to
// match, prepare_q<true>), the online softmax, then O^T m-tile 2w + half from bytes 2half, 2half + 1
// of word w of the value runs: row g the first, row g + 8 the second (write_output's order).
__device__ __forceinline__ void tile_math8(const Tile8 &cur, int n_valid, const u32 (&qb)[MT][2], float km0,
                                           float km1, Softmax &st, int g) {
    float s[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        u32 a0, a1, a2, a3;
        e4m3x4_to_f16(cur.k[0][i], a0, a2);
        e4m3x4_to_f16(cur.k[1][i], a1, a3);
        mma16816(s[0], a0, a1, a2, a3, qb[i][0], qb[i][1]);
    }
    u32 pb[1][2];
    softmax_step<1>(s, n_valid, km0, km1, st, g, pb);
#pragma unroll
    for (int w = 0; w < D / 32; ++w) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            u32 f[2][2];  // [token pair (2c, 2c+1) / (2c+8, 2c+9)][row g, row g+8]
#pragma unroll
            for (int pr = 0; pr < 2; ++pr)
                e4m3x4_to_f16(prmt(cur.v[2 * pr][w], cur.v[2 * pr + 1][w], half ? 0x7362u : 0x5140u), f[pr][0],
                              f[pr][1]);
            mma16816(st.acc[2 * w + half], f[0][0], f[0][1], f[1][0], f[1][1], pb[0][0], pb[0][1]);
        }
    }
}

template <bool FP8>
struct TileOf {
    typedef Tile type;
};
template <>
struct TileOf<true> {
    typedef Tile8 type;
};

// CTA cta's (head group, request, split), CTAs ordered by head group fastest; false past the grid.
__device__ __forceinline__ bool place_cta(int cta, int batch, int num_splits, int &hg, int &b, int &split) {
    const int groups = HKV / HC;
    if (cta >= groups * batch * num_splits) return false;
    hg = cta % groups;
    b = (cta / groups) % batch;
    split = cta / (groups * batch);
    return true;
}

// The cp.async pipeline of a CTA over n_tiles tiles: tile t's copies (issue(t, slot_lane), the
// slots of its tokens from slot_of(t), read one tile ahead) go out STAGES - 1 tiles ahead, one
// commit group each (empty past the end); compute(t) reads tile t once every warp's copies landed.
template <typename SlotOf, typename Issue, typename Compute>
__device__ __forceinline__ void run_pipeline(int n_tiles, SlotOf slot_of, Issue issue, Compute compute) {
    u32 slot_lane = n_tiles > 0 ? slot_of(0) : 0;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < n_tiles) issue(s, slot_lane);
        cp_async_commit();
        if (s + 1 < n_tiles) slot_lane = slot_of(s + 1);
    }
    for (int t = 0; t < n_tiles; ++t) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of tile t landed
        barrier();                    // everyone's; and every warp is done reading tile t-1's stage
        const int nt = t + STAGES - 1;
        if (nt < n_tiles) issue(nt, slot_lane);
        cp_async_commit();
        if (nt + 1 < n_tiles) slot_lane = slot_of(nt + 1);
        compute(t);
    }
}

// One CTA: the HC heads of head group hg of request b's split `split`, its tiles copied STAGES - 1
// ahead into shared memory (every warp reads its head's part of each).
template <bool FP8>
__device__ __forceinline__ void staged_program(int cta, unsigned char *smem, const void *q_ptr,
                                               const unsigned char *k, const unsigned char *v,
                                               const unsigned char *kb, const unsigned char *vb, const float *kf,
                                               const float *vf, const indptr_t *indptr, const index_t *indices,
                                               void *o_ptr, float *lse_ptr, float scale_log2, int batch,
                                               int split_base, int num_splits, int split_stride) {
    constexpr int T = FP8 ? TILE8 : TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int hg, b, split;
    if (!place_cta(cta, batch, num_splits, hg, b, split)) return;
    const int h = hg * HC + warp;
    const int g = lane >> 2, c = lane & 3;
    Program p;
    begin_program<T, FP8>(p, q_ptr, kf, scale_log2, indptr, indices, b, h, split, num_splits, g, c);
    const int lo = p.lo, hi = p.hi;
    const index_t *idx = p.idx;

    const int n_tiles = hi > lo ? (hi - lo + T - 1) / T : 0;  // the same for every warp
    const u32 base = shared_addr(smem);
    auto slot_of = [&](int t) -> u32 { return (u32)idx[min(lo + t * T + lane, hi - 1)]; };
    auto issue = [&](int tile, u32 slot_lane) {  // tile's copies into its stage
        const u32 stage = base + (tile % STAGES) * STAGE_SPACE;
        if constexpr (FP8)
            copy_code_rows<TILE8, CPR8, true>(stage, slot_lane, warp, lane, k + hg * CODE_ROW8, v + hg * CODE_ROW8);
        else
            issue_tile(stage, slot_lane, warp, lane, k + hg * CODE_ROW, v + hg * CODE_ROW, kb + hg * SCALE_ROW,
                       vb + hg * SCALE_ROW);
    };
    run_pipeline(n_tiles, slot_of, issue, [&](int t) {
        typename TileOf<FP8>::type cur;
        const u32 stage = base + (t % STAGES) * STAGE_SPACE;
        if constexpr (FP8) {
            read_tile8(cur, stage, warp, g, c);
            tile_math8(cur, hi - (lo + t * T), p.qb, p.km0, p.km1, p.st, g);
        } else {
            read_tile(cur, stage, warp, g, c);
            tile_math(cur, hi - (lo + t * T), p.qb, p.km0, p.km1, p.st, g);
        }
    });
    write_output(p.st, vf[h] * (FP8 ? 1.0f : 64.0f), h, b, g, c, o_ptr, lse_ptr, split_base, split, split_stride);
}

#if FP8_PART
// The FP8 pool's buffers, CSR and split placement (its scale_log2, batch and split_stride are the
// NVFP4 part's). Compiled with PAIRED, each CTA takes both parts of one split (paired_program;
// split_base8 and num_splits8 unused).
#define FP8_ARGS                                                                                              \
    , const unsigned char *__restrict__ k8, const unsigned char *__restrict__ v8, const float *__restrict__ kf8, \
        const float *__restrict__ vf8, const indptr_t *__restrict__ indptr8,                                   \
        const index_t *__restrict__ indices8, int split_base8, int num_splits8

// A paired CTA: the HC heads of head group hg of split `split` of request b's FP8 part AND of the
// same split of its NVFP4 part, in one pipeline (the FP8 part's 16-token tiles, then the NVFP4
// part's 32-token ones, every stage STAGE_SPACE bytes so either fits) and one softmax state, so
// one output row per split instead of one per part, and no second ramp or tail. Scores of both
// parts are in the same units (each part's key scale is in its q), so m and l carry over; the
// accumulators hold raw values times the part's value scale (vf8 for FP8, vf * 2^6 for NVFP4), so
// at the switch they are multiplied by vf8 / (vf * 2^6) and q is prepared again for NVFP4 keys.
__device__ __forceinline__ void paired_program(int cta, unsigned char *smem, const void *q_ptr, const unsigned char *k,
                                               const unsigned char *v, const unsigned char *kb, const unsigned char *vb,
                                               const float *kf, const float *vf, const indptr_t *indptr,
                                               const index_t *indices,
                                               const unsigned char *k8, const unsigned char *v8, const float *kf8,
                                               const float *vf8, const indptr_t *indptr8, const index_t *indices8,
                                               void *o_ptr, float *lse_ptr, float scale_log2, int batch,
                                               int split_base, int num_splits, int split_stride) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int hg, b, split;
    if (!place_cta(cta, batch, num_splits, hg, b, split)) return;
    const int h = hg * HC + warp;
    const int g = lane >> 2, c = lane & 3;
    allow_dependents();
    int lo8, hi8, lo4, hi4;
    const index_t *idx8, *idx4;
    split_range<TILE8>(indptr8, indices8, b, split, num_splits, lo8, hi8, idx8);
    split_range<TILE>(indptr, indices, b, split, num_splits, lo4, hi4, idx4);
    idx8 += lo8, idx4 += lo4;  // each part's split from its first token: n8 and n4 tokens
    const int len8 = max(hi8 - lo8, 0), len4 = max(hi4 - lo4, 0);
    const int n8 = (len8 + TILE8 - 1) / TILE8;  // tiles, the same for every warp
    const int n_tiles = n8 + (len4 + TILE - 1) / TILE;
    u32 qb[MT][2];
    float km0, km1;
    if (n8 > 0)
        prepare_q<true>(q_ptr, kf8, scale_log2, b, h, g, c, qb, km0, km1);
    else
        prepare_q<false>(q_ptr, kf, scale_log2, b, h, g, c, qb, km0, km1);
    Softmax st;
    softmax_init(st);
    const u32 base = shared_addr(smem);
    // slot of token lane of tile t (a token past its part's split reads the split's last key)
    auto slot_of = [&](int t) -> u32 {
        return t < n8 ? (u32)idx8[min(t * TILE8 + lane, len8 - 1)] : (u32)idx4[min((t - n8) * TILE + lane, len4 - 1)];
    };
    auto issue = [&](int tile, u32 slot_lane) {
        const u32 stage = base + (tile % STAGES) * STAGE_SPACE;
        if (tile < n8)
            copy_code_rows<TILE8, CPR8, true>(stage, slot_lane, warp, lane, k8 + hg * CODE_ROW8, v8 + hg * CODE_ROW8);
        else
            issue_tile(stage, slot_lane, warp, lane, k + hg * CODE_ROW, v + hg * CODE_ROW, kb + hg * SCALE_ROW,
                       vb + hg * SCALE_ROW);
    };
    run_pipeline(n_tiles, slot_of, issue, [&](int t) {
        const u32 stage = base + (t % STAGES) * STAGE_SPACE;
        if (t < n8) {
            Tile8 cur;
            read_tile8(cur, stage, warp, g, c);
            tile_math8(cur, len8 - t * TILE8, qb, km0, km1, st, g);
            return;
        }
        if (t == n8 && n8 > 0) {  // the switch from the FP8 part to the NVFP4 part
            const float r = vf8[h] / (vf[h] * 64.0f);
#pragma unroll
            for (int j = 0; j < MT; ++j) st.acc[j][0] *= r, st.acc[j][1] *= r, st.acc[j][2] *= r, st.acc[j][3] *= r;
            prepare_q<false>(q_ptr, kf, scale_log2, b, h, g, c, qb, km0, km1);
        }
        Tile cur;
        read_tile(cur, stage, warp, g, c);
        tile_math(cur, len4 - (t - n8) * TILE, qb, km0, km1, st, g);
    });
    write_output(st, n_tiles > n8 ? vf[h] * 64.0f : vf8[h], h, b, g, c, o_ptr, lse_ptr, split_base, split,
                 split_stride);
}
#else
#define FP8_ARGS
#endif

extern "C" __global__ void __launch_bounds__(32 * HC, MIN_CTAS) nvfp4_decode(KERNEL_ARGS FP8_ARGS) {
    extern __shared__ __align__(16) unsigned char smem[];
    int cta = blockIdx.x;
#if FP8_PART && PAIRED
    paired_program(cta, smem, q_ptr, k, v, kb, vb, kf, vf, indptr, indices, k8, v8, kf8, vf8, indptr8, indices8, o_ptr,
                   lse_ptr, scale_log2, batch, split_base, num_splits, split_stride);
    return;
#elif FP8_PART
    const int fp8_ctas = (HKV / HC) * batch * num_splits8;
    if (cta < fp8_ctas) {
        staged_program<true>(cta, smem, q_ptr, k8, v8, k8, v8, kf8, vf8, indptr8, indices8, o_ptr, lse_ptr,
                             scale_log2, batch, split_base8, num_splits8, split_stride);
        return;
    }
    cta -= fp8_ctas;
#endif
    staged_program<false>(cta, smem, q_ptr, k, v, kb, vb, kf, vf, indptr, indices, o_ptr, lse_ptr, scale_log2,
                          batch, split_base, num_splits, split_stride);
}
#endif
