// Paged decode attention on the CPU with shared prefixes read once per group (cascade).
//
// Each request's single query token attends over (a) the shared segments of the groups it
// belongs to (a system prompt many requests point at) and (b) its own suffix. KV rows are read
// straight from the pool through slot lists (no gather copy), GQA folded in, softmax in float32.
//
// Phase A, parallel over (group, KV head, key range): the members' queries of one KV head form
// a block of rows (members x G) scored against the segment's keys like a small GEMM (key tile
// transposed, broadcast-FMA, no horizontal sums), so each shared key is loaded once per group
// instead of once per request. Each item leaves an unnormalised partial state (m, l, acc).
// Phase B, parallel over requests: the request's suffix (few rows: dot products four keys at a
// time), then the group partials of the request are merged in by log-sum-exp state merging:
//   m = max(m_A, m_B); acc = acc_A e^(m_A - m) + acc_B e^(m_B - m); l likewise.
// Output = acc / l, log-sum-exp = m + log l (-inf and zeros for a request with no keys).
//
// Layouts: q [B, Hq, D] (row stride free, D contiguous); k_pool / v_pool [slots, Hkv, D]
// contiguous; slots [B, L] int64 (row stride free); lens [B]; shared segments as CSR: seg_slots
// [N] with seg_offsets [S+1], members [M] (batch rows) with member_offsets [S+1].
// Hq = G * Hkv: query head h * G + g reads KV head h.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace {

constexpr int CHUNK = 256;        // keys whose scores are kept at once (one softmax update each)
constexpr int MIN_GEMM_ROWS = 8;  // from this many rows the GEMM-like path beats dot products
constexpr float NEG_INF = -std::numeric_limits<float>::infinity();

template <typename T>
struct KV {
  const T* k;
  const T* v;
  int64_t row;  // elements per slot: Hkv * D
  int d;
  const T* key(int64_t slot, int h) const { return k + slot * row + h * d; }
  const T* val(int64_t slot, int h) const { return v + slot * row + h * d; }
};

// Eight floats as one vector value (GCC vector extension: AVX2 register, two NEON registers);
// the microkernels below keep their accumulators in named vectors so they stay in registers.
typedef float v8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));

inline v8 load8(const float* p) {
  v8 r;
  std::memcpy(&r, p, sizeof(r));
  return r;
}
inline v8 load8(const c10::BFloat16* p) {  // bfloat16 is the high half of a float32
  u16x8 h;
  std::memcpy(&h, p, sizeof(h));
  u32x8 w = __builtin_convertvector(h, u32x8) << 16;
  v8 r;
  std::memcpy(&r, &w, sizeof(r));
  return r;
}
inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof(v)); }
inline float hsum(v8 v) {
  float s = 0.f;
  for (int t = 0; t < 8; ++t) s += v[t];
  return s;
}

// exp over an array (Cephes expf polynomial; relative error ~2e-7), eight lanes at a time.
// Inputs are scores minus a running max (<= 0); below -87.3 the result is ~1e-38, not 0.
inline v8 exp8(v8 x) {
  typedef int32_t i32x8 __attribute__((vector_size(32)));
  const v8 lo = v8{} - 87.3f, hi = v8{} + 88.7f, magic = v8{} + 12582912.f;  // 1.5 * 2^23
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const v8 k = (x * 1.44269504088896341f + magic) - magic;  // round(x / ln 2)
  const v8 r = x - k * 0.693359375f + k * 2.12194440e-4f;
  v8 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const v8 y = p * r * r + r + 1.0f;
  const i32x8 bits = (__builtin_convertvector(k, i32x8) + 127) << 23;  // 2^k
  v8 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

inline void exp_inplace(float* x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) store8(x + i, exp8(load8(x + i)));
  if (i < n) {  // the tail through a padded vector
    float t[8] = {};
    std::memcpy(t, x + i, sizeof(float) * (n - i));
    const v8 e = exp8(load8(t));
    std::memcpy(x + i, &e, sizeof(float) * (n - i));
  }
}

// Scores are kept transposed, s[j * rp + r] (key j, query row r), so the GEMM-like path stores
// whole vectors of rows and the softmax runs across rows.

// Few rows (R <= 3, d a multiple of 8): R rows x 4 keys of 8-lane partial dot products in
// registers, each key and query slice loaded once per step; lane sums at the end.
template <int R, typename T>
void scores_few(const float* qf, int rp, int r0, const KV<T>& kv, int h, const int64_t* slots, int n,
                float* s) {
  const int d = kv.d;
  for (int j0 = 0; j0 < n; j0 += 4) {
    const T* k[4];
    for (int jj = 0; jj < 4; ++jj) k[jj] = kv.key(slots[std::min(j0 + jj, n - 1)], h);
    v8 a[R][4] = {};
    for (int i = 0; i < d; i += 8) {
      v8 kk[4];
      for (int jj = 0; jj < 4; ++jj) kk[jj] = load8(k[jj] + i);
      for (int r = 0; r < R; ++r) {
        const v8 q = load8(qf + (r0 + r) * d + i);
        for (int jj = 0; jj < 4; ++jj) a[r][jj] += q * kk[jj];
      }
    }
    const int jn = std::min(4, n - j0);
    for (int jj = 0; jj < jn; ++jj) {
      for (int r = 0; r < R; ++r) s[(j0 + jj) * rp + r0 + r] = hsum(a[r][jj]);
    }
  }
}

// Many rows (rp a multiple of 16): qt [d, rp] holds the queries transposed; 6 keys x 16 rows
// of scores accumulate by broadcast-FMA, the key elements read straight from the pool rows.
template <typename T>
void scores_many(const float* qt, int rp, const KV<T>& kv, int h, const int64_t* slots, int n, float* s) {
  const int d = kv.d;
  for (int j0 = 0; j0 < n; j0 += 6) {
    const T* k[6];
    for (int jj = 0; jj < 6; ++jj) k[jj] = kv.key(slots[std::min(j0 + jj, n - 1)], h);
    const int jn = std::min(6, n - j0);
    for (int r0 = 0; r0 < rp; r0 += 16) {
      v8 a[6][2] = {};
      for (int i = 0; i < d; ++i) {
        const v8 q0 = load8(qt + i * rp + r0), q1 = load8(qt + i * rp + r0 + 8);
#pragma GCC unroll 6
        for (int jj = 0; jj < 6; ++jj) {
          const float x = static_cast<float>(k[jj][i]);
          a[jj][0] += x * q0;
          a[jj][1] += x * q1;
        }
      }
      for (int jj = 0; jj < jn; ++jj) {
        store8(s + (j0 + jj) * rp + r0, a[jj][0]);
        store8(s + (j0 + jj) * rp + r0 + 8, a[jj][1]);
      }
    }
  }
}

// acc[r0 + r] += sum_j p[j, r0 + r] v_j for R rows, W vectors (8 W columns) of acc at a time
// in registers: R * W accumulators, each V slice loaded once per key.
template <int R, int W, typename T>
void pv_tile(const float* p, int rp, int r0, const KV<T>& kv, int h, const int64_t* slots, int n, float* acc) {
  const int d = kv.d;
  for (int d0 = 0; d0 < d; d0 += 8 * W) {
    v8 a[R][W];
    for (int r = 0; r < R; ++r) {
      for (int w = 0; w < W; ++w) a[r][w] = load8(acc + (r0 + r) * d + d0 + 8 * w);
    }
    for (int j = 0; j < n; ++j) {
      const T* vr = kv.val(slots[j], h) + d0;
      v8 vv[W];
      for (int w = 0; w < W; ++w) vv[w] = load8(vr + 8 * w);
      const float* pr = p + j * rp + r0;
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const float x = pr[r];
        for (int w = 0; w < W; ++w) a[r][w] += x * vv[w];
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int w = 0; w < W; ++w) store8(acc + (r0 + r) * d + d0 + 8 * w, a[r][w]);
    }
  }
}

// All rows of acc (rows of the tile kernels: 6 x 16 columns for many rows, 3 x 32 for few).
template <typename T>
void pv(const float* p, int rows, int rp, const KV<T>& kv, int h, const int64_t* slots, int n, float* acc) {
  const bool wide = kv.d % 32 == 0;
  int r0 = 0;
  if (kv.d % 16 == 0) {
    for (; r0 + 6 <= rows; r0 += 6) pv_tile<6, 2>(p, rp, r0, kv, h, slots, n, acc);
  }
  for (; r0 + 3 <= rows; r0 += 3) {
    wide ? pv_tile<3, 4>(p, rp, r0, kv, h, slots, n, acc) : pv_tile<3, 1>(p, rp, r0, kv, h, slots, n, acc);
  }
  for (; r0 < rows; ++r0) {
    wide ? pv_tile<1, 4>(p, rp, r0, kv, h, slots, n, acc) : pv_tile<1, 1>(p, rp, r0, kv, h, slots, n, acc);
  }
}

// One softmax update per row over a chunk of n keys: s becomes exp(s - m_new); rows >= `rows`
// (padding) are updated too (their scores are 0: no NaN) and ignored by the caller.
void softmax_chunk(float* s, int rp, int n, float* m, float* l, float* acc, int d, float* tmp) {
  float* mb = tmp;
  float* sum = tmp + rp;
  for (int r = 0; r < rp; ++r) {
    mb[r] = NEG_INF;
    sum[r] = 0.f;
  }
  for (int j = 0; j < n; ++j) {
    const float* sj = s + j * rp;
#pragma omp simd
    for (int r = 0; r < rp; ++r) mb[r] = std::max(mb[r], sj[r]);
  }
  for (int r = 0; r < rp; ++r) {
    const float m_new = std::max(m[r], mb[r]);
    const float corr = std::exp(m[r] - m_new);  // 0 on the first chunk (m = -inf)
    if (corr != 1.f) {
      float* a = acc + r * d;
      for (int i = 0; i < d; ++i) a[i] *= corr;
    }
    l[r] *= corr;
    m[r] = m_new;
  }
  for (int j = 0; j < n; ++j) {
    float* sj = s + j * rp;
#pragma omp simd
    for (int r = 0; r < rp; ++r) sj[r] -= m[r];
  }
  exp_inplace(s, n * rp);
  for (int j = 0; j < n; ++j) {
    const float* sj = s + j * rp;
#pragma omp simd
    for (int r = 0; r < rp; ++r) sum[r] += sj[r];
  }
  for (int r = 0; r < rp; ++r) l[r] += sum[r];
}

inline bool many_rows(int rows, int d) { return rows >= MIN_GEMM_ROWS && d % 16 == 0; }
inline int padded_rows(int rows, int d) { return many_rows(rows, d) ? (rows + 15) / 16 * 16 : rows; }

// Scratch of one attend call: scores [CHUNK, rp], transposed queries [d, rp], row temporaries.
struct Scratch {
  std::vector<float> s, qt, tmp;
};

// Update the state (m, l, acc) of `rows` query rows qf [rp, d] (scaled; padding rows zero,
// rp = padded_rows(rows, d)) with keys slots[0:n] of KV head h. m, l, acc have rp rows.
template <typename T>
void attend(const float* qf, int rows, const KV<T>& kv, int h, const int64_t* slots, int64_t n,
            float* m, float* l, float* acc, Scratch& scratch) {
  const int d = kv.d, rp = padded_rows(rows, d);
  const bool many = many_rows(rows, d);
  scratch.s.resize(static_cast<size_t>(CHUNK) * rp);
  scratch.tmp.resize(2 * static_cast<size_t>(rp));
  if (many) {
    scratch.qt.resize(static_cast<size_t>(d) * rp);
    for (int r = 0; r < rp; ++r) {
      for (int i = 0; i < d; ++i) scratch.qt[i * rp + r] = qf[r * d + i];
    }
  }
  float* s = scratch.s.data();
  for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
    const int cn = static_cast<int>(std::min<int64_t>(CHUNK, n - c0));
    const int64_t* cs = slots + c0;
    if (many) {
      scores_many(scratch.qt.data(), rp, kv, h, cs, cn, s);
    } else if (d % 8 == 0) {
      int r0 = 0;
      for (; r0 + 3 <= rows; r0 += 3) scores_few<3>(qf, rp, r0, kv, h, cs, cn, s);
      for (; r0 < rows; ++r0) scores_few<1>(qf, rp, r0, kv, h, cs, cn, s);
    } else {  // odd head sizes: plain dot products
      for (int j = 0; j < cn; ++j) {
        const T* kr = kv.key(cs[j], h);
        for (int r = 0; r < rows; ++r) {
          float dot = 0.f;
          for (int i = 0; i < d; ++i) dot += qf[r * d + i] * static_cast<float>(kr[i]);
          s[j * rp + r] = dot;
        }
      }
    }
    softmax_chunk(s, rp, cn, m, l, acc, d, scratch.tmp.data());
    if (d % 8 == 0) {
      pv(s, rows, rp, kv, h, cs, cn, acc);
    } else {
      for (int j = 0; j < cn; ++j) {
        const T* vr = kv.val(cs[j], h);
        for (int r = 0; r < rows; ++r) {
          for (int i = 0; i < d; ++i) acc[r * d + i] += s[j * rp + r] * static_cast<float>(vr[i]);
        }
      }
    }
  }
}

// Merge a partial state (pm, pl, pacc) into (m, l, acc).
inline void merge_into(float& m, float& l, float* acc, float pm, float pl, const float* pacc, int d) {
  if (pm == NEG_INF) return;
  if (m == NEG_INF) {
    m = pm;
    l = pl;
    std::memcpy(acc, pacc, sizeof(float) * d);
    return;
  }
  const float mn = std::max(m, pm), a = std::exp(m - mn), b = std::exp(pm - mn);
  for (int i = 0; i < d; ++i) acc[i] = acc[i] * a + pacc[i] * b;
  l = l * a + pl * b;
  m = mn;
}

// The G query heads of KV head h of one request (qb: its q row), scaled, into dst [G, d] floats.
template <typename T>
inline void load_queries(const T* qb, int64_t q_s1, int64_t h, int gsz, int d, float scale, float* dst) {
  for (int g = 0; g < gsz; ++g) {
    const T* qrow = qb + (h * gsz + g) * q_s1;
    for (int i = 0; i < d; ++i) dst[g * d + i] = static_cast<float>(qrow[i]) * scale;
  }
}

// One phase-A work item: group g's members x G query rows of KV head h over segment keys
// [key_begin, key_begin + key_n); its partial state starts at row row_base.
struct Item {
  int64_t g, h, key_begin, key_n, row_base;
};

template <typename T>
void run(const at::Tensor& q, const KV<T>& kv, const at::Tensor& slots, const at::Tensor& lens,
         const at::Tensor& seg_slots, const at::Tensor& seg_offsets, const at::Tensor& members,
         const at::Tensor& member_offsets, float scale, at::Tensor& out, at::Tensor& lse) {
  const int64_t b = q.size(0), hq = q.size(1), hkv = kv.row / kv.d;
  const int d = kv.d, gsz = static_cast<int>(hq / hkv);
  const int64_t q_s0 = q.stride(0), q_s1 = q.stride(1), slot_s0 = slots.stride(0);
  const T* qp = q.data_ptr<T>();
  const int64_t* slot_ptr = slots.data_ptr<int64_t>();
  const int64_t* len_ptr = lens.data_ptr<int64_t>();
  const int64_t* seg = seg_slots.data_ptr<int64_t>();
  const int64_t* seg_off = seg_offsets.data_ptr<int64_t>();
  const int64_t* mem = members.data_ptr<int64_t>();
  const int64_t* mem_off = member_offsets.data_ptr<int64_t>();
  const int64_t n_groups = seg_offsets.size(0) - 1;
  T* op = out.data_ptr<T>();
  float* lp = lse.data_ptr<float>();

  // Phase A work items. Segments split into key ranges when there are too few items to keep
  // every thread busy.
  const int64_t target = 2 * at::get_num_threads();
  const int64_t split = n_groups ? std::max<int64_t>(1, (target + n_groups * hkv - 1) / (n_groups * hkv)) : 1;
  std::vector<Item> items;
  std::vector<int64_t> first_item(n_groups, 0), chunks(n_groups, 1);
  int64_t total_rows = 0;
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t nk = seg_off[g + 1] - seg_off[g], rows = (mem_off[g + 1] - mem_off[g]) * gsz;
    const int64_t per = std::max<int64_t>(64, (nk + split - 1) / split);
    chunks[g] = std::max<int64_t>(1, (nk + per - 1) / per);
    first_item[g] = static_cast<int64_t>(items.size());
    for (int64_t h = 0; h < hkv; ++h) {
      for (int64_t c = 0; c < chunks[g]; ++c) {
        const int64_t begin = c * per;
        items.push_back({g, h, begin, std::max<int64_t>(0, std::min(per, nk - begin)), total_rows});
        total_rows += rows;
      }
    }
  }
  std::vector<float> part_m(total_rows), part_l(total_rows), part_acc(total_rows * d);
  at::parallel_for(0, static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
    Scratch scratch;
    std::vector<float> qf, m, l, acc;
    for (int64_t it = begin; it < end; ++it) {
      const Item& item = items[it];
      const int64_t nm = mem_off[item.g + 1] - mem_off[item.g];
      const int rows = static_cast<int>(nm * gsz), rp = padded_rows(rows, d);
      qf.assign(static_cast<size_t>(rp) * d, 0.f);
      acc.assign(static_cast<size_t>(rp) * d, 0.f);
      m.assign(rp, NEG_INF);
      l.assign(rp, 0.f);
      for (int64_t mi = 0; mi < nm; ++mi) {
        load_queries(qp + mem[mem_off[item.g] + mi] * q_s0, q_s1, item.h, gsz, d, scale,
                     qf.data() + mi * gsz * d);
      }
      attend(qf.data(), rows, kv, static_cast<int>(item.h), seg + seg_off[item.g] + item.key_begin,
             item.key_n, m.data(), l.data(), acc.data(), scratch);
      std::memcpy(part_m.data() + item.row_base, m.data(), sizeof(float) * rows);
      std::memcpy(part_l.data() + item.row_base, l.data(), sizeof(float) * rows);
      std::memcpy(part_acc.data() + item.row_base * d, acc.data(), sizeof(float) * rows * d);
    }
  });

  // (group, member index) of each request
  std::vector<std::vector<std::pair<int64_t, int64_t>>> in_groups(b);
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int64_t mi = 0; mi < mem_off[g + 1] - mem_off[g]; ++mi) in_groups[mem[mem_off[g] + mi]].push_back({g, mi});
  }

  at::parallel_for(0, b, 1, [&](int64_t begin, int64_t end) {
    Scratch scratch;
    const int rp = padded_rows(gsz, d);
    std::vector<float> qf(static_cast<size_t>(rp) * d), acc(static_cast<size_t>(rp) * d), m(rp), l(rp);
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t h = 0; h < hkv; ++h) {
        std::fill(qf.begin(), qf.end(), 0.f);
        std::fill(acc.begin(), acc.end(), 0.f);
        std::fill(m.begin(), m.end(), NEG_INF);
        std::fill(l.begin(), l.end(), 0.f);
        load_queries(qp + r * q_s0, q_s1, h, gsz, d, scale, qf.data());
        attend(qf.data(), gsz, kv, static_cast<int>(h), slot_ptr + r * slot_s0, len_ptr[r], m.data(),
               l.data(), acc.data(), scratch);
        for (const auto& [g, mi] : in_groups[r]) {
          for (int64_t c = 0; c < chunks[g]; ++c) {
            const int64_t base = items[first_item[g] + h * chunks[g] + c].row_base + mi * gsz;
            for (int g2 = 0; g2 < gsz; ++g2) {
              merge_into(m[g2], l[g2], acc.data() + g2 * d, part_m[base + g2], part_l[base + g2],
                         part_acc.data() + (base + g2) * d, d);
            }
          }
        }
        for (int g = 0; g < gsz; ++g) {
          const int64_t head = h * gsz + g;
          T* o = op + (r * hq + head) * d;
          if (l[g] == 0.f) {  // no keys at all: zeros and lse -inf (merges as "nothing")
            for (int i = 0; i < d; ++i) o[i] = static_cast<T>(0.f);
            lp[r * hq + head] = NEG_INF;
            continue;
          }
          const float inv = 1.f / l[g];
          for (int i = 0; i < d; ++i) o[i] = static_cast<T>(acc[g * d + i] * inv);
          lp[r * hq + head] = m[g] + std::log(l[g]);
        }
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor> decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                                    const at::Tensor& v_pool, const at::Tensor& slots,
                                                    const at::Tensor& lens, const at::Tensor& seg_slots,
                                                    const at::Tensor& seg_offsets, const at::Tensor& members,
                                                    const at::Tensor& member_offsets, double scale) {
  const int64_t b = q.size(0), hq = q.size(1), d = q.size(2);
  auto out = at::empty({b, hq, d}, q.options());
  auto lse = at::empty({b, hq}, q.options().dtype(at::kFloat));
  auto launch = [&](auto type_tag) {
    using T = decltype(type_tag);
    const KV<T> kv{k_pool.data_ptr<T>(), v_pool.data_ptr<T>(), k_pool.size(1) * d, static_cast<int>(d)};
    run<T>(q, kv, slots, lens, seg_slots, seg_offsets, members, member_offsets, static_cast<float>(scale),
           out, lse);
  };
  if (q.scalar_type() == at::kBFloat16) {
    launch(c10::BFloat16{});
  } else {
    TORCH_CHECK(q.scalar_type() == at::kFloat, "radixgen_cpu decode_attention takes float32 or bfloat16");
    launch(float{});
  }
  return {out, lse};
}

}  // namespace

TORCH_LIBRARY(radixgen_cpu, m) {
  m.def("decode_attention(Tensor q, Tensor k_pool, Tensor v_pool, Tensor slots, Tensor lens, "
        "Tensor seg_slots, Tensor seg_offsets, Tensor members, Tensor member_offsets, float scale) "
        "-> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(radixgen_cpu, CPU, m) { m.impl("decode_attention", &decode_attention); }
