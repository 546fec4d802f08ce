// Paged decode attention on the CPU: each request's single query token attends over KV rows
// read straight from the pool through its slot list (no gather copy), GQA folded in, online
// softmax in float32. Returns the output and the log-sum-exp of the scaled scores, so a
// partial result (a request's own suffix) merges with a shared-prefix part (cascade.py).
//
// Layouts: q [B, Hq, D] (row stride free, D contiguous); k_pool / v_pool [slots, Hkv, D]
// contiguous; slots [B, L] int64 (row stride free); lens [B] int64 (valid slots per row,
// 0 <= lens[b] <= L). Hq = G * Hkv: query head h * G + g reads KV head h.
// Parallel over requests (at::parallel_for, torch's OpenMP pool); per request and KV head,
// keys in blocks of BLOCK: scores of the G queries (four keys at a time), block max, exp,
// rescale, V accumulate.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

constexpr int BLOCK = 32;
constexpr int MAX_G = 16;
constexpr int MAX_D = 256;

// exp over an array, vectorizable (Cephes expf polynomial; relative error ~2e-7). Inputs are
// scores minus a running max (<= 0); below -87.3 the result is ~1e-38 instead of 0.
inline void exp_inplace(float* __restrict x, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) {
    float v = std::min(std::max(x[i], -87.3f), 88.7f);
    float k = std::floor(v * 1.44269504088896341f + 0.5f);
    float r = v - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(float));
    x[i] = y * scale;
  }
}

template <typename T>
inline float dot(const float* __restrict q, const T* __restrict k, int d) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < d; ++i) s += q[i] * static_cast<float>(k[i]);
  return s;
}

// Scores of one query against four keys: four independent accumulator rows (8 lanes each) the
// compiler keeps in vector registers, so the FMA chains overlap instead of one dependent chain
// per dot product; lane sums at the end.
template <typename T>
inline void dot4(const float* __restrict q, const T* __restrict k0, const T* __restrict k1,
                 const T* __restrict k2, const T* __restrict k3, int d, float* __restrict out) {
  float a0[8] = {}, a1[8] = {}, a2[8] = {}, a3[8] = {};
  int i = 0;
  for (; i + 8 <= d; i += 8) {
#pragma omp simd
    for (int t = 0; t < 8; ++t) {
      const float qv = q[i + t];
      a0[t] += qv * static_cast<float>(k0[i + t]);
      a1[t] += qv * static_cast<float>(k1[i + t]);
      a2[t] += qv * static_cast<float>(k2[i + t]);
      a3[t] += qv * static_cast<float>(k3[i + t]);
    }
  }
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  for (int t = 0; t < 8; ++t) {
    s0 += a0[t];
    s1 += a1[t];
    s2 += a2[t];
    s3 += a3[t];
  }
  for (; i < d; ++i) {
    s0 += q[i] * static_cast<float>(k0[i]);
    s1 += q[i] * static_cast<float>(k1[i]);
    s2 += q[i] * static_cast<float>(k2[i]);
    s3 += q[i] * static_cast<float>(k3[i]);
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

template <typename T>
inline void axpy(float* __restrict acc, float p, const T* __restrict v, int d) {
#pragma omp simd
  for (int i = 0; i < d; ++i) acc[i] += p * static_cast<float>(v[i]);
}

template <typename T>
void decode_request(const T* q, int64_t q_s1, const T* k_pool, const T* v_pool,
                    const int64_t* slots, int64_t n, int hkv, int g_size, int d, float scale,
                    T* out, float* lse) {
  const int64_t row = static_cast<int64_t>(hkv) * d;  // one slot's K (or V) in the pool
  float qv[MAX_G * MAX_D], acc[MAX_G * MAX_D], s[MAX_G * BLOCK];
  float m[MAX_G], l[MAX_G];
  for (int h = 0; h < hkv; ++h) {
    for (int g = 0; g < g_size; ++g) {
      const T* qrow = q + (h * g_size + g) * q_s1;
      for (int i = 0; i < d; ++i) qv[g * d + i] = static_cast<float>(qrow[i]) * scale;
      m[g] = -std::numeric_limits<float>::infinity();
      l[g] = 0.f;
    }
    std::fill(acc, acc + g_size * d, 0.f);
    for (int64_t j0 = 0; j0 < n; j0 += BLOCK) {
      const int jn = static_cast<int>(std::min<int64_t>(BLOCK, n - j0));
      int j = 0;
      for (; j + 4 <= jn; j += 4) {  // four keys at a time (dot4), then the rest one by one
        const T* k0 = k_pool + slots[j0 + j] * row + h * d;
        const T* k1 = k_pool + slots[j0 + j + 1] * row + h * d;
        const T* k2 = k_pool + slots[j0 + j + 2] * row + h * d;
        const T* k3 = k_pool + slots[j0 + j + 3] * row + h * d;
        for (int g = 0; g < g_size; ++g) dot4(qv + g * d, k0, k1, k2, k3, d, s + g * BLOCK + j);
      }
      for (; j < jn; ++j) {
        const T* krow = k_pool + slots[j0 + j] * row + h * d;
        for (int g = 0; g < g_size; ++g) s[g * BLOCK + j] = dot(qv + g * d, krow, d);
      }
      for (int g = 0; g < g_size; ++g) {
        float* sg = s + g * BLOCK;
        float mb = sg[0];
        for (int j = 1; j < jn; ++j) mb = std::max(mb, sg[j]);
        const float m_new = std::max(m[g], mb);
        const float corr = std::exp(m[g] - m_new);  // 0 on the first block (m = -inf)
        for (int j = 0; j < jn; ++j) sg[j] -= m_new;
        exp_inplace(sg, jn);
        float sum = 0.f;
        for (int j = 0; j < jn; ++j) sum += sg[j];
        l[g] = l[g] * corr + sum;
        m[g] = m_new;
        if (corr != 1.f) {
          float* a = acc + g * d;
          for (int i = 0; i < d; ++i) a[i] *= corr;
        }
      }
      for (int j = 0; j < jn; ++j) {
        const T* vrow = v_pool + slots[j0 + j] * row + h * d;
        for (int g = 0; g < g_size; ++g) axpy(acc + g * d, s[g * BLOCK + j], vrow, d);
      }
    }
    for (int g = 0; g < g_size; ++g) {
      const int head = h * g_size + g;
      T* o = out + static_cast<int64_t>(head) * d;
      if (n == 0) {  // an empty part: zeros and lse -inf (merges as "nothing")
        for (int i = 0; i < d; ++i) o[i] = static_cast<T>(0.f);
        lse[head] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const float inv = 1.f / l[g];
      for (int i = 0; i < d; ++i) o[i] = static_cast<T>(acc[g * d + i] * inv);
      lse[head] = m[g] + std::log(l[g]);
    }
  }
}

std::tuple<at::Tensor, at::Tensor> decode_attention(const at::Tensor& q, const at::Tensor& k_pool,
                                                    const at::Tensor& v_pool, const at::Tensor& slots,
                                                    const at::Tensor& lens, double scale) {
  const int64_t b = q.size(0), hq = q.size(1), d = q.size(2), hkv = k_pool.size(1);
  const int g_size = static_cast<int>(hq / hkv);
  auto out = at::empty({b, hq, d}, q.options());
  auto lse = at::empty({b, hq}, q.options().dtype(at::kFloat));
  const int64_t* slot_ptr = slots.data_ptr<int64_t>();
  const int64_t* len_ptr = lens.data_ptr<int64_t>();
  const int64_t slot_s0 = slots.stride(0);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, q.scalar_type(), "radixgen_cpu_decode", [&] {
    const scalar_t* qp = q.data_ptr<scalar_t>();
    const scalar_t* kp = k_pool.data_ptr<scalar_t>();
    const scalar_t* vp = v_pool.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    float* lp = lse.data_ptr<float>();
    const int64_t q_s0 = q.stride(0), q_s1 = q.stride(1);
    at::parallel_for(0, b, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        decode_request<scalar_t>(qp + i * q_s0, q_s1, kp, vp, slot_ptr + i * slot_s0,
                                 len_ptr[i], static_cast<int>(hkv), g_size, static_cast<int>(d),
                                 static_cast<float>(scale), op + i * hq * d, lp + i * hq);
      }
    });
  });
  return {out, lse};
}

}  // namespace

TORCH_LIBRARY(radixgen_cpu, m) {
  m.def("decode_attention(Tensor q, Tensor k_pool, Tensor v_pool, Tensor slots, Tensor lens, float scale) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(radixgen_cpu, CPU, m) { m.impl("decode_attention", &decode_attention); }
