// Ops that move elements: embedding (row gather), cast, reshape, slice, concat. Except cast they copy bytes,
// so they serve every dtype (bf16, f16, f32, i32, i64) with 16-byte accesses where alignment allows.
#ifndef WEFT_DEVICE_OPS_LAYOUT_CUH
#define WEFT_DEVICE_OPS_LAYOUT_CUH

#include "common.cuh"

namespace weft_dev {

// Runs of contiguous elements shorter than this are copied element by element by all threads at once
// rather than one run after another by the whole block.
constexpr long long kMinBlockRun = WEFT_BLOCK_THREADS;

__device__ __forceinline__ void copy_elem(char* dst, const char* src, int esize) {
  switch (esize) {
    case 8: *reinterpret_cast<unsigned long long*>(dst) = *reinterpret_cast<const unsigned long long*>(src); break;
    case 4: *reinterpret_cast<unsigned int*>(dst) = *reinterpret_cast<const unsigned int*>(src); break;
    default: *reinterpret_cast<unsigned short*>(dst) = *reinterpret_cast<const unsigned short*>(src); break;
  }
}

// ---- embedding ----

__device__ void embedding_impl(const weft_task_args* a, const weft_env* env) {
  const char* table = static_cast<const char*>(env->slots[a->in[0]]);
  const void* ids = env->slots[a->in[1]];
  char* o = static_cast<char*>(env->slots[a->out]);
  const i64 v_dim = a->d[0], d_dim = a->d[1];
  const int esize = dtype_size(a->dtype), idt = a->i[0];
  const i64 n = a->col1 - a->col0;
  if (n <= 0) return;
  for (i64 r = a->row0; r < a->row1; ++r) {
    const i64 id = load_int(ids, idt, r);
    char* dst = o + (r * d_dim + a->col0) * esize;
    if (id < 0 || id >= v_dim) {
      zero_bytes(dst, n * esize, esize, tid(), WEFT_BLOCK_THREADS);
      if (tid() == 0)
        weft_dev::record_error(env, WEFT_DEV_ERR_INDEX, static_cast<unsigned int>(r),
                              static_cast<unsigned int>(static_cast<u64>(id)), 0u);
      continue;
    }
    copy_bytes(dst, table + (id * d_dim + a->col0) * esize, n * esize, esize, tid(), WEFT_BLOCK_THREADS);
  }
}

// ---- cast ----

template <typename A, typename B>
struct SameType {
  static constexpr bool value = false;
};
template <typename A>
struct SameType<A, A> {
  static constexpr bool value = true;
};
template <typename T>
struct IsInt {
  static constexpr bool value = SameType<T, int>::value || SameType<T, i64>::value;
};

// One conversion, as the reference: float -> float through f32 with one round-to-nearest-even; int -> float
// rounded to f32 first (then to a 16-bit float, as the reference's storage does); float -> int truncating
// and saturating with NaN -> 0 (cvt.rzi); i64 -> i32 keeps the low 32 bits.
template <typename TO, typename TI>
__device__ __forceinline__ TO cast_value(TI v) {
  if constexpr (IsInt<TI>::value && IsInt<TO>::value) {
    return static_cast<TO>(v);
  } else if constexpr (IsInt<TI>::value) {
    float f;
    if constexpr (SameType<TI, int>::value)
      f = __int2float_rn(v);
    else
      f = __ll2float_rn(v);
    return from_f<TO>(f);
  } else if constexpr (IsInt<TO>::value) {
    const float f = to_f(v);
    if (f != f) return 0;  // cvt.rzi gives 0 for NaN to 32 bits, but INT64_MIN to 64 bits: 0 for both
    if constexpr (SameType<TO, int>::value)
      return __float2int_rz(f);
    else
      return __float2ll_rz(f);
  } else {
    return from_f<TO>(to_f(v));
  }
}

template <typename TI, typename TO>
__device__ void cast_impl(const weft_task_args* a, const weft_env* env) {
  const TI* x = static_cast<const TI*>(env->slots[a->in[0]]);
  TO* o = static_cast<TO*>(env->slots[a->out]);
  for_each_span(a, view_cols(a), [&](i64 begin, i64 n) {
    if constexpr (SameType<TI, TO>::value) {
      copy_bytes(o + begin, x + begin, n * static_cast<i64>(sizeof(TO)), static_cast<int>(sizeof(TO)), tid(),
                 WEFT_BLOCK_THREADS);
    } else {
      for (i64 j = tid(); j < n; j += WEFT_BLOCK_THREADS) o[begin + j] = cast_value<TO>(x[begin + j]);
    }
  });
}

template <typename TI>
__device__ void cast_from(const weft_task_args* a, const weft_env* env) {
  switch (a->dtype) {
    case WEFT_DEV_BF16: cast_impl<TI, bf16>(a, env); break;
    case WEFT_DEV_F16: cast_impl<TI, f16>(a, env); break;
    case WEFT_DEV_F32: cast_impl<TI, float>(a, env); break;
    case WEFT_DEV_I32: cast_impl<TI, int>(a, env); break;
    case WEFT_DEV_I64: cast_impl<TI, i64>(a, env); break;
    default: break;
  }
}

// ---- reshape ----

__device__ void reshape_impl(const weft_task_args* a, const weft_env* env) {
  const char* x = static_cast<const char*>(env->slots[a->in[0]]);
  char* o = static_cast<char*>(env->slots[a->out]);
  const int esize = dtype_size(a->dtype);
  for_each_span(a, view_cols(a), [&](i64 begin, i64 n) {
    copy_bytes(o + begin * esize, x + begin * esize, n * esize, esize, tid(), WEFT_BLOCK_THREADS);
  });
}

// ---- slice ----

// Output [outer, len, inner] from x [outer, A, inner] starting at `start` along A.
__device__ void slice_impl(const weft_task_args* a, const weft_env* env) {
  const char* x = static_cast<const char*>(env->slots[a->in[0]]);
  char* o = static_cast<char*>(env->slots[a->out]);
  const i64 a_dim = a->d[1], inner = a->d[2], start = a->d[3], len = a->d[4];
  const int esize = dtype_size(a->dtype);
  const i64 blk = len * inner;  // output elements per outer index, contiguous in x too
  if (blk <= 0) return;
  auto src_of = [&](i64 e) { return ((e / blk) * a_dim + start) * inner + e % blk; };
  for_each_span(a, view_cols(a), [&](i64 begin, i64 n) {
    if (blk < kMinBlockRun) {
      for (i64 e = begin + tid(); e < begin + n; e += WEFT_BLOCK_THREADS)
        copy_elem(o + e * esize, x + src_of(e) * esize, esize);
      return;
    }
    for (i64 e = begin; e < begin + n;) {
      const i64 rem = e % blk, run = begin + n - e < blk - rem ? begin + n - e : blk - rem;
      copy_bytes(o + e * esize, x + src_of(e) * esize, run * esize, esize, tid(), WEFT_BLOCK_THREADS);
      e += run;
    }
  });
}

// ---- concat ----

// Output [outer, sum A_j, inner] from up to 6 inputs [outer, A_j, inner]; d1=inner, d2..d7=A_j, i0=count.
__device__ void concat_impl(const weft_task_args* a, const weft_env* env) {
  char* o = static_cast<char*>(env->slots[a->out]);
  const i64 inner = a->d[1];
  const int count = a->i[0] < WEFT_TASK_MAX_INPUTS ? a->i[0] : WEFT_TASK_MAX_INPUTS;
  const int esize = dtype_size(a->dtype);
  i64 off[WEFT_TASK_MAX_INPUTS + 1];  // where input j's block starts within one outer block of the output
  off[0] = 0;
  for (int j = 0; j < WEFT_TASK_MAX_INPUTS; ++j) off[j + 1] = off[j] + (j < count ? a->d[2 + j] * inner : 0);
  const i64 tot = off[count];
  if (tot <= 0 || count <= 0) return;
  // The input and the index within it of output element e.
  auto locate = [&](i64 e, int& j, i64& src) {
    const i64 outer_i = e / tot, rem = e % tot;
    j = 0;
    while (j + 1 < count && rem >= off[j + 1]) ++j;
    src = outer_i * (off[j + 1] - off[j]) + (rem - off[j]);
  };
  auto input = [&](int j) { return static_cast<const char*>(env->slots[a->in[j]]); };
  for_each_span(a, view_cols(a), [&](i64 begin, i64 n) {
    if (tot < kMinBlockRun) {
      for (i64 e = begin + tid(); e < begin + n; e += WEFT_BLOCK_THREADS) {
        int j;
        i64 src;
        locate(e, j, src);
        copy_elem(o + e * esize, input(j) + src * esize, esize);
      }
      return;
    }
    for (i64 e = begin; e < begin + n;) {
      int j;
      i64 src;
      locate(e, j, src);
      const i64 rem = e % tot, left = off[j + 1] - rem;
      const i64 run = begin + n - e < left ? begin + n - e : left;
      copy_bytes(o + e * esize, input(j) + src * esize, run * esize, esize, tid(), WEFT_BLOCK_THREADS);
      e += run;
    }
  });
}

}  // namespace weft_dev

// EMBEDDING: in table [V, D], ids [R]. d0=V, d1=D. i0=ids dtype. Bad id: zeros for that row + WEFT_DEV_ERR_INDEX
// ([1]=row, [2]=low 32 bits of the id).
WEFT_DEV_OP_BODY(embedding) {
  weft_dev::embedding_impl(a, env);
}

// CAST: in x. i0=input dtype; output dtype in dtype. C = d[WEFT_D_VIEW_COLS] or col1.
WEFT_DEV_OP_BODY(cast) {
  switch (a->i[0]) {
    case WEFT_DEV_BF16: weft_dev::cast_from<weft_dev::bf16>(a, env); break;
    case WEFT_DEV_F16: weft_dev::cast_from<weft_dev::f16>(a, env); break;
    case WEFT_DEV_F32: weft_dev::cast_from<float>(a, env); break;
    case WEFT_DEV_I32: weft_dev::cast_from<int>(a, env); break;
    case WEFT_DEV_I64: weft_dev::cast_from<weft_dev::i64>(a, env); break;
    default: break;
  }
}

// RESHAPE: in x. Copies elements in order; tile over the output view (C = d[WEFT_D_VIEW_COLS] or col1).
WEFT_DEV_OP_BODY(reshape) {
  weft_dev::reshape_impl(a, env);
}

// SLICE: in x seen as [outer, A, inner]. d0=outer, d1=A, d2=inner, d3=start, d4=output axis length.
// C = d[WEFT_D_VIEW_COLS] or col1.
WEFT_DEV_OP_BODY(slice) {
  weft_dev::slice_impl(a, env);
}

// CONCAT: in up to 6 inputs [outer, A_j, inner]. d0=outer, d1=inner, d2..d7=A_j (0 unused), i0=count.
// C = d[WEFT_D_VIEW_COLS] or col1.
WEFT_DEV_OP_BODY(concat) {
  weft_dev::concat_impl(a, env);
}

#endif  // WEFT_DEVICE_OPS_LAYOUT_CUH
