// rope and attention_decode.
#ifndef WEFT_DEVICE_OPS_ATTENTION_CUH
#define WEFT_DEVICE_OPS_ATTENTION_CUH

#include "attention_smem.cuh"
#include "common.cuh"

namespace weft_dev {

// ---- rope ----

struct RopeParams {
  i64 hd;
  double theta, factor, low, high, old_len;
  int scaling;  // 0 none, 1 linear, 2 llama3
};

// inv_freq[i] in double, as the reference (HF's default / linear / llama3 rules). __d*_rn keep the llama3
// blend from being fused into an FMA the reference does not do.
__device__ __forceinline__ double rope_inv_freq(const RopeParams& rp, i64 i) {
  double f = pow(rp.theta, (-2.0 * static_cast<double>(i)) / static_cast<double>(rp.hd));
  if (rp.scaling == 1) {
    f = f / rp.factor;
  } else if (rp.scaling == 2) {
    const double wavelen = (2.0 * 3.141592653589793) / f;
    if (wavelen > rp.old_len / rp.low) {
      f = f / rp.factor;
    } else if (!(wavelen < rp.old_len / rp.high)) {
      const double smooth = (rp.old_len / wavelen - rp.low) / (rp.high - rp.low);
      f = __dadd_rn(__ddiv_rn(__dmul_rn(__dsub_rn(1.0, smooth), f), rp.factor), __dmul_rn(smooth, f));
    }
  }
  return f;
}

// cos and sin of pair i at position p, in double as the CPU reference computes them, rounded to float. One
// sincos shares its argument reduction between the two (measured: the rope table of attention_decode_qkv,
// one serial chain of double math per thread, took ~2 us).
__device__ __forceinline__ void rope_cos_sin(const RopeParams& rp, double p, i64 i, float& c, float& s) {
  double sd, cd;
  sincos(p * rope_inv_freq(rp, i), &sd, &cd);
  c = static_cast<float>(cd);
  s = static_cast<float>(sd);
}

// The rope parameters as attention_decode_qkv and rope_table carry them (task_abi.h: d2=hd, d4=original_max_position,
// d5..d8 the doubles' bits, i1=scaling).
__device__ __forceinline__ RopeParams rope_params_of(const weft_task_args* a) {
  RopeParams rp;
  rp.hd = a->d[2];
  rp.old_len = static_cast<double>(a->d[4]);
  rp.theta = __longlong_as_double(a->d[5]);
  rp.factor = __longlong_as_double(a->d[6]);
  rp.low = __longlong_as_double(a->d[7]);
  rp.high = __longlong_as_double(a->d[8]);
  rp.scaling = a->i[1];
  return rp;
}

// Rotates the pairs of one head (xh, oh at the head's start): half style pairs (i, i + hd/2), interleaved
// (2i, 2i+1). Both values of a pair are read before either is written, so o may alias x.
template <typename T>
__device__ __forceinline__ void rope_pair(const T* xh, T* oh, i64 i, i64 half, bool interleaved, float c, float s) {
  const i64 ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
  const float xa = to_f(xh[ia]), xb = to_f(xh[ib]);
  oh[ia] = from_f<T>(__fsub_rn(__fmul_rn(xa, c), __fmul_rn(xb, s)));
  oh[ib] = from_f<T>(__fadd_rn(__fmul_rn(xb, c), __fmul_rn(xa, s)));
}

template <typename T>
__device__ void rope_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  const void* pos = in_ptr<void>(a, env, 1);
  T* o = out_ptr<T>(a, env);
  const i64 cdim = a->d[0], hd = a->d[1];
  RopeParams rp;
  rp.hd = hd;
  rp.old_len = static_cast<double>(a->d[2]);
  rp.theta = a->f[0];
  rp.factor = a->f[1];
  rp.low = a->f[2];
  rp.high = a->f[3];
  rp.scaling = a->i[1];
  const bool interleaved = a->i[0] == 1;
  const int pdt = a->i[2];
  if (hd < 2 || a->row1 <= a->row0 || a->col1 <= a->col0) return;
  const i64 half = hd / 2, h0 = a->col0 / hd, nh = (a->col1 - a->col0) / hd, pairs = nh * half;
  // cos/sin of a row are computed once (in double, then rounded to f32) and shared by its heads.
  const bool cached = 2 * half * static_cast<i64>(sizeof(float)) <= WEFT_SMEM_BYTES;
  float* cs = reinterpret_cast<float*>(smem);
  float* sn = cs + half;
  for (i64 r = a->row0; r < a->row1; ++r) {
    const double p = static_cast<double>(load_int(pos, pdt, r));
    const T* xr = x + r * cdim;
    T* orow = o + r * cdim;
    if (cached) {
      block_sync();  // the previous row's readers are done
      for (i64 i = tid(); i < half; i += WEFT_BLOCK_THREADS) rope_cos_sin(rp, p, i, cs[i], sn[i]);
      block_sync();
    }
    for (i64 e = tid(); e < pairs; e += WEFT_BLOCK_THREADS) {
      const i64 h = h0 + e / half, i = e % half;
      float c, s;
      if (cached) {
        c = cs[i];
        s = sn[i];
      } else {
        rope_cos_sin(rp, p, i, c, s);
      }
      rope_pair(xr + h * hd, orow + h * hd, i, half, interleaved, c, s);
    }
  }
}

// rope_table: rows [row0, row1) of the table, a thread per (row, pair): the cos at column i, the sin at hd/2 + i.
__device__ void rope_table_impl(const weft_task_args* a, const weft_env* env) {
  const RopeParams rp = rope_params_of(a);
  const void* pos = in_ptr<void>(a, env, 0);
  float* o = out_ptr<float>(a, env);
  if (rp.hd < 2 || a->row1 <= a->row0 || (a->row1 - a->row0) * (rp.hd / 2) >= (i64{1} << 31)) return;
  const int half = static_cast<int>(rp.hd / 2), n = static_cast<int>(a->row1 - a->row0) * half;
  for (int e = tid(); e < n; e += WEFT_BLOCK_THREADS) {
    const i64 r = a->row0 + e / half;
    const int i = e % half;
    float* row = o + r * rp.hd;
    rope_cos_sin(rp, static_cast<double>(load_int(pos, a->i[0], r)), i, row[i], row[half + i]);
  }
}

// ---- attention_decode ----
//
// Per (row b, kv head): append k_new/v_new to the caches at p = positions[b], then for the group's q heads
// (kAttnGroup at a time) attend over t in [0, p] in chunks of tc timesteps (flash-decoding within the block):
//   1. scores s[g][t] = scale * (q_g · k_t): lanes split head_dim in groups of `gs` lanes (16-byte loads),
//      a warp covers 32/gs timesteps at once (kAttnSteps of them per pass), shuffles sum within the group;
//   2. per head: chunk max, running max m, rescale factor, p = exp(s - m), running sum l;
//   3. acc[g][j] = acc * rescale + sum_t p[g][t] * v_t[j]: threads own 16-byte slices of V rows and strided
//      subsets of the timesteps, their partial sums are added in a fixed order (attn_pv_vec); a scalar
//      path, one thread per (g, j), serves unaligned caches.
// Output = acc / l. With one chunk (p < tc) this is exactly the reference's max-subtracted softmax; across
// chunks only the rounding of the rescaled sums differs.
constexpr int kAttnGroup = 8;     // q heads per pass (register arrays in step 1)
constexpr int kAttnMaxChunk = 1024;
constexpr int kAttnSteps = 4;     // timesteps per lane group and pass in step 1
constexpr int kAttnPvLoads = 16;  // V loads in flight per thread in step 3 (scalar path)
constexpr int kAttnPvHeads = 4;   // heads per pass in step 3 (16-byte path: 4 x 8 f32 accumulators)

struct AttnSmem {
  float *q, *acc, *score, *m, *l, *rescale;
  int heads;  // q heads per pass
  i64 chunk;  // timesteps per chunk
};

// Carves shared memory for `group` q heads of head_dim hd; heads == 0 when hd does not fit.
__device__ __forceinline__ AttnSmem attn_smem(char* smem, i64 hd, i64 group, int reserve) {
  AttnSmem s;
  const i64 budget = (WEFT_SMEM_BYTES - reserve) / static_cast<i64>(sizeof(float)) - 3 * kAttnGroup;
  i64 heads = budget / (2 * hd + 64);  // q + acc, and at least 64 score slots per head
  if (heads > group) heads = group;
  if (heads > kAttnGroup) heads = kAttnGroup;
  if (hd > WEFT_ATTN_MAX_HEAD_DIM) heads = 0;
  s.heads = static_cast<int>(heads);
  s.chunk = heads > 0 ? (budget - 2 * heads * hd) / heads : 0;
  if (s.chunk > kAttnMaxChunk) s.chunk = kAttnMaxChunk;
  float* f = reinterpret_cast<float*>(smem);
  s.m = f;
  s.l = f + kAttnGroup;
  s.rescale = f + 2 * kAttnGroup;
  s.q = f + 3 * kAttnGroup;
  s.acc = s.q + heads * hd;
  s.score = s.acc + heads * hd;
  return s;
}

// Step 3 with 16-byte V loads: thread (jv, slice) = (tid % nvec, tid / nvec) owns dims [jv*N, jv*N + N) of
// kAttnPvHeads heads at a time and the timesteps t = slice, slice + slices, ...; the slices' partial sums are
// then added into sm.acc (after its rescale) in a fixed order: lanes of one warp by shuffles when nvec is a
// power of two below 32, then warp by warp (or slice by slice otherwise), so results are deterministic.
// vb: timestep t0 of this kv head (rows row_kv apart).
template <typename T>
__device__ void attn_pv_vec(const T* vb, i64 row_kv, i64 hd, i64 tc, int gc, const AttnSmem& sm) {
  constexpr int N = Vec<T>::N;
  const int nvec = static_cast<int>(hd / N);
  const int slices = WEFT_BLOCK_THREADS / nvec;
  const int jv = tid() % nvec, slice = tid() / nvec;
  const bool active = slice < slices;
  const bool warp_shuffle = nvec < WEFT_WARP_THREADS && (nvec & (nvec - 1)) == 0;
  for (i64 e = tid(); e < gc * hd; e += WEFT_BLOCK_THREADS) sm.acc[e] *= sm.rescale[e / hd];
  block_sync();  // rescaled before any partial sum is added
  for (int h0 = 0; h0 < gc; h0 += kAttnPvHeads) {
    const int hc = gc - h0 < kAttnPvHeads ? gc - h0 : kAttnPvHeads;
    float acc[kAttnPvHeads][N];
#pragma unroll
    for (int h = 0; h < kAttnPvHeads; ++h)
#pragma unroll
      for (int e = 0; e < N; ++e) acc[h][e] = 0.0f;
    if (active) {
      const T* vp = vb + jv * N;
      i64 t = slice;
      // Four loads in flight per thread, then their FMAs.
      for (; t + 3 * slices < tc; t += 4 * slices) {
        uint4 raw[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) raw[u] = *reinterpret_cast<const uint4*>(vp + (t + u * slices) * row_kv);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          float v[N];
          unpack_vec<T>(raw[u], v);
#pragma unroll
          for (int h = 0; h < kAttnPvHeads; ++h) {
            if (h < hc) {
              const float w = sm.score[(h0 + h) * sm.chunk + t + u * slices];
#pragma unroll
              for (int e = 0; e < N; ++e) acc[h][e] = fmaf(w, v[e], acc[h][e]);
            }
          }
        }
      }
      for (; t < tc; t += slices) {
        float v[N];
        load_vec(vp + t * row_kv, v);
#pragma unroll
        for (int h = 0; h < kAttnPvHeads; ++h) {
          if (h < hc) {
            const float w = sm.score[(h0 + h) * sm.chunk + t];
#pragma unroll
            for (int e = 0; e < N; ++e) acc[h][e] = fmaf(w, v[e], acc[h][e]);
          }
        }
      }
    }
    int rounds = slices, my_round = slice;
    if (warp_shuffle) {
      // Lanes jv, jv + nvec, ... of a warp hold the same dims: sum them into lanes < nvec.
#pragma unroll
      for (int h = 0; h < kAttnPvHeads; ++h)
#pragma unroll
        for (int e = 0; e < N; ++e)
          for (int o = nvec; o < WEFT_WARP_THREADS; o *= 2) acc[h][e] += __shfl_xor_sync(WEFT_FULL_MASK, acc[h][e], o);
      rounds = WEFT_BLOCK_WARPS;
      my_round = lane() < nvec ? warp() : -1;
    }
    for (int rd = 0; rd < rounds; ++rd) {
      if (active && my_round == rd) {
#pragma unroll
        for (int h = 0; h < kAttnPvHeads; ++h)
          if (h < hc) {
            float* dst = sm.acc + (h0 + h) * hd + jv * N;
#pragma unroll
            for (int e = 0; e < N; ++e) dst[e] += acc[h][e];
          }
      }
      block_sync();
    }
  }
}

// Contexts too long for shared memory, or shapes attention_smem_fast does not take. Not inlined into the entry
// point: its register arrays would otherwise spill in the short-context path too.
template <typename T>
__device__ __noinline__ void attention_general(const weft_task_args* a, const weft_env* env, const AttnIo<T>& io,
                                              char* smem) {
  constexpr int N = Vec<T>::N;
  T* kc = io.kc;
  T* vc = io.vc;
  const void* pos = io.pos;
  T* o = io.o;
  const i64 hq = io.hq, hkv = io.hkv, hd = io.hd, s_dim = io.s_dim;
  const float scale = io.scale;
  const int pdt = io.pos_dtype;
  if (hq <= 0 || hkv <= 0 || hd <= 0 || hq % hkv != 0 || a->row1 <= a->row0 || a->col1 <= a->col0) return;
  const i64 group = hq / hkv, unit_cols = group * hd;
  const i64 kv0 = a->col0 / unit_cols, kv1 = a->col1 / unit_cols;
  const i64 row_kv = hkv * hd;  // elements per timestep of a cache row, and per row of k_new / v_new
  const int esize = static_cast<int>(sizeof(T));
  const AttnSmem sm = attn_smem(smem, hd, group, io.reserve);
  // K rows are 16-byte aligned when the cache is and hd elements fill whole 16-byte units.
  const bool kvec = aligned16(kc) && (hd * esize) % 16 == 0;
  const i64 units = kvec ? hd / N : hd;
  // V rows take the 16-byte path under the same alignment condition, when a block row of threads can hold
  // every 16-byte vector of a head.
  const bool pv_vec = aligned16(vc) && (hd * esize) % 16 == 0 && hd / N <= WEFT_BLOCK_THREADS;
  int gs = 1;
  while (gs < units && gs < WEFT_WARP_THREADS) gs *= 2;
  const int per_warp = WEFT_WARP_THREADS / gs, slots = WEFT_BLOCK_WARPS * per_warp;
  const int sub = lane() / gs, gl = lane() % gs;

  for (i64 b = a->row0; b < a->row1; ++b) {
    const i64 p = io.pos_staged ? *io.pos_staged : load_int(pos, pdt, b);
    for (i64 kvh = kv0; kvh < kv1; ++kvh) {
      T* ob = o + b * hq * hd + kvh * unit_cols;
      block_sync();  // the previous unit's readers of smem and of the caches are done
      if (p < 0 || p >= s_dim || sm.heads == 0) {
        zero_bytes(ob, unit_cols * esize, esize, tid(), WEFT_BLOCK_THREADS);
        if (tid() == 0 && sm.heads != 0)
          weft_dev::record_error(env, WEFT_DEV_ERR_POSITION, static_cast<unsigned int>(b),
                                static_cast<unsigned int>(static_cast<u64>(p)), 0u);
        continue;
      }
      const i64 slot = (b * s_dim + p) * row_kv + kvh * hd;
      copy_bytes(kc + slot, io.kn + b * io.kv_row + kvh * io.kv_head, hd * esize, esize, tid(), WEFT_BLOCK_THREADS);
      copy_bytes(vc + slot, io.vn + b * io.kv_row + kvh * io.kv_head, hd * esize, esize, tid(), WEFT_BLOCK_THREADS);
      // The block reads the new cache row below; the barrier makes this block's writes visible to it.
      const T* kb = kc + b * s_dim * row_kv + kvh * hd;  // timestep t at kb + t * row_kv
      const T* vb = vc + b * s_dim * row_kv + kvh * hd;
      const i64 steps = p + 1;

      for (i64 g0 = 0; g0 < group; g0 += sm.heads) {
        const int gc = static_cast<int>(group - g0 < sm.heads ? group - g0 : sm.heads);
        const T* qh = io.q + b * io.q_row + kvh * io.q_kv + g0 * hd;
        block_sync();
        for (i64 e = tid(); e < gc * hd; e += WEFT_BLOCK_THREADS) {
          sm.q[e] = to_f(qh[e]);
          sm.acc[e] = 0.0f;
        }
        if (tid() < kAttnGroup) {
          sm.m[tid()] = neg_inf();
          sm.l[tid()] = 0.0f;
        }
        block_sync();

        for (i64 t0 = 0; t0 < steps; t0 += sm.chunk) {
          const i64 tc = steps - t0 < sm.chunk ? steps - t0 : sm.chunk;
          // 1. scores; each lane group takes kAttnSteps timesteps per pass, so that their K loads are in
          //    flight together (one timestep per pass is bound by memory latency).
          for (i64 base = 0; base < tc; base += static_cast<i64>(slots) * kAttnSteps) {
            float part[kAttnSteps][kAttnGroup];
#pragma unroll
            for (int st = 0; st < kAttnSteps; ++st) {
#pragma unroll
              for (int g = 0; g < kAttnGroup; ++g) part[st][g] = 0.0f;
              const i64 tt = base + st * slots + warp() * per_warp + sub;
              if (tt >= tc) continue;
              const T* kr = kb + (t0 + tt) * row_kv;
              if (kvec) {
                for (i64 u = gl; u < units; u += gs) {
                  float kv[N];
                  load_vec(kr + u * N, kv);
#pragma unroll
                  for (int g = 0; g < kAttnGroup; ++g)
                    if (g < gc) {
                      const float* qg = sm.q + g * hd + u * N;
#pragma unroll
                      for (int e = 0; e < N; ++e) part[st][g] = fmaf(qg[e], kv[e], part[st][g]);
                    }
                }
              } else {
                for (i64 j = gl; j < hd; j += gs) {
                  const float kv = to_f(kr[j]);
#pragma unroll
                  for (int g = 0; g < kAttnGroup; ++g)
                    if (g < gc) part[st][g] = fmaf(sm.q[g * hd + j], kv, part[st][g]);
                }
              }
            }
#pragma unroll
            for (int st = 0; st < kAttnSteps; ++st) {
              const i64 tt = base + st * slots + warp() * per_warp + sub;
#pragma unroll
              for (int g = 0; g < kAttnGroup; ++g) {
                if (g < gc) {  // gc is uniform: every lane reaches the shuffles
                  const float dot = group_sum(part[st][g], gs);
                  if (tt < tc && gl == 0) sm.score[g * sm.chunk + tt] = __fmul_rn(scale, dot);
                }
              }
            }
          }
          block_sync();
          // 2. softmax statistics, one warp per head (a warp takes more where the block has fewer warps than
          //    heads)
          for (int g = warp(); g < gc; g += WEFT_BLOCK_WARPS) {
            float* sc = sm.score + g * sm.chunk;
            const float m_old = sm.m[g], m_new = nan_max(m_old, warp_max_of(sc, tc));
            const float rescale = m_old == neg_inf() ? 0.0f : expf(m_old - m_new);
            const float sum = warp_exp_sum(sc, tc, m_new);
            // Every lane read sm.m[g] and sm.l[g] above; the shuffles already order those reads before this
            // write, but racecheck only counts barriers.
            __syncwarp();
            if (lane() == 0) {
              sm.m[g] = m_new;
              sm.l[g] = sm.l[g] * rescale + sum;
              sm.rescale[g] = rescale;
            }
          }
          block_sync();
          // 3. weighted sum of V
          if (pv_vec) {
            attn_pv_vec<T>(vb + t0 * row_kv, row_kv, hd, tc, gc, sm);
          } else {
            for (i64 e = tid(); e < gc * hd; e += WEFT_BLOCK_THREADS) {
              const i64 g = e / hd, j = e % hd;
              const float* w = sm.score + g * sm.chunk;
              const T* vcol = vb + t0 * row_kv + j;
              float acc = sm.acc[e] * sm.rescale[g];
              i64 t = 0;
              // kAttnPvLoads independent V loads in flight per thread, then their FMAs in order.
              for (; t + kAttnPvLoads <= tc; t += kAttnPvLoads) {
                float v[kAttnPvLoads];
#pragma unroll
                for (int u = 0; u < kAttnPvLoads; ++u) v[u] = to_f(vcol[(t + u) * row_kv]);
#pragma unroll
                for (int u = 0; u < kAttnPvLoads; ++u) acc = fmaf(w[t + u], v[u], acc);
              }
              for (; t < tc; ++t) acc = fmaf(w[t], to_f(vcol[t * row_kv]), acc);
              sm.acc[e] = acc;
            }
          }
          block_sync();  // scores are rewritten by the next chunk
        }
        T* og = ob + g0 * hd;
        for (i64 e = tid(); e < gc * hd; e += WEFT_BLOCK_THREADS) og[e] = from_f<T>(sm.acc[e] / sm.l[e / hd]);
      }
    }
  }
}

template <typename T>
__device__ __noinline__ void attention_decode_general(const weft_task_args* a, const weft_env* env, char* smem) {
  attention_general<T>(a, env, attn_io_plain<T>(a, env), smem);
}

// Out of line, as attention_decode_qkv_impl (ops_attention_qkv.cuh) says why; a dispatcher, as it is.
template <typename T>
__device__ __noinline__ void attention_decode_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  // Short contexts (prefetch_op started the copies).
  if (attn_smem_run<T, AttnSmemFastInstance>(a, env, smem)) return;
  attention_decode_general<T>(a, env, smem);
}

}  // namespace weft_dev

// ROPE: in x [R, C], positions [R]. d0=C, d1=hd, d2=original_max_position. f0=theta, f1=factor,
// f2=low_freq_factor, f3=high_freq_factor. i0=style (0 half, 1 interleaved), i1=scaling (0 none, 1 linear,
// 2 llama3), i2=positions dtype. col0/col1 multiples of hd. inv_freq, the angle and cos/sin in double.
WEFT_DEV_OP_BODY(rope) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::rope_impl, a, env, smem);
}

// ATTENTION_DECODE: in q [B, Hq*hd], k_new, v_new [B, Hkv*hd], k_cache, v_cache [B, S, Hkv, hd], positions [B].
// d0=Hq, d1=Hkv, d2=hd, d3=S. f0=scale. i0=positions dtype. Tile: rows x whole kv-head groups of q heads.
// Bad position: zeros for that row's heads of the tile, caches untouched, WEFT_DEV_ERR_POSITION
// ([1]=row, [2]=position). hd > WEFT_ATTN_MAX_HEAD_DIM: zeros.
WEFT_DEV_OP_BODY(attention_decode) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::attention_decode_impl, a, env, smem);
}

// ROPE_TABLE: see task_abi.h. Out of line in the task loop (op_inlined): it runs once per decode step.
WEFT_DEV_OP_BODY(rope_table) { weft_dev::rope_table_impl(a, env); (void)smem; }

#endif  // WEFT_DEVICE_OPS_ATTENTION_CUH
