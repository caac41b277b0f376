/*
 * weft — a JIT runtime that turns tensor graphs into one persistent GPU megakernel.
 *
 * This is the one public C header. Everything crosses it as opaque handles, plain integers and
 * option structs that start with `size_t struct_size` (so fields can be appended without breaking
 * callers built against an older header).
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *   - Fallible calls return weft_status (WEFT_OK == 0); results go to out-parameters, which are left
 *     untouched on error. Nothing aborts, asserts or throws across this boundary.
 *   - On error, weft_last_error_message() returns a message for the calling thread naming the op,
 *     tensor or dimension at fault and what was expected.
 *   - Strings passed in are copied; the caller keeps ownership. Strings returned are owned by weft and
 *     stay valid as documented on each function.
 *   - Destroying NULL is a no-op. Using a destroyed handle returns WEFT_ERROR_INVALID_HANDLE (the
 *     library tracks live handles; it never dereferences a dead one).
 *   - Thread-safety: distinct handles may be used from distinct threads at once. One handle may be read
 *     (queried, run on the reference interpreter, serialized) from several threads at once, but must not
 *     be modified (ops added, outputs marked, destroyed) while another thread uses it.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Version                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
/* Single integer, e.g. 0.1.0 -> 100: compare with weft_version() to detect a header/library mismatch. */
#define WEFT_VERSION (WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH)

/* The version of the loaded library as WEFT_VERSION encodes it. Never fails; thread-safe. */
WEFT_API int weft_version(void);

/* The version of the loaded library as "MAJOR.MINOR.PATCH". Static storage; thread-safe. */
WEFT_API const char* weft_version_string(void);

/* ---------------------------------------------------------------------------------------------- */
/* Status and errors                                                                               */
/* ---------------------------------------------------------------------------------------------- */

typedef enum weft_status {
  WEFT_OK = 0,
  WEFT_ERROR_INVALID_ARGUMENT = 1, /* a NULL pointer, a bad dtype, shape, dim, attribute or tensor */
  WEFT_ERROR_INVALID_HANDLE = 2,   /* a handle that is NULL where one is required, or destroyed */
  WEFT_ERROR_OUT_OF_MEMORY = 3,
  WEFT_ERROR_UNSUPPORTED = 4, /* valid request this version cannot do (the message says what) */
  WEFT_ERROR_COMPILE = 5,     /* NVRTC / nvJitLink failed; the message holds the log */
  WEFT_ERROR_CUDA = 6,        /* a CUDA driver call failed */
  WEFT_ERROR_CACHE = 7,       /* the kernel cache could not be used (permissions, I/O) */
  WEFT_ERROR_DEADLOCK = 8,    /* the device watchdog stopped a task that waited too long */
  WEFT_ERROR_IO = 9,          /* a file could not be read or written */
  WEFT_ERROR_INTERNAL = 10,   /* a bug in weft: please report the message */
  WEFT_STATUS_MAX_ENUM_ = 0x7fffffff /* not a status: makes every int32 value >= 0 representable */
} weft_status;

/* A static, human-readable name for a status ("WEFT_ERROR_INVALID_ARGUMENT"); unknown values give
 * "WEFT_STATUS_UNKNOWN". Never NULL; thread-safe. */
WEFT_API const char* weft_status_string(weft_status status);

/* The message of the last failed call on the calling thread ("" if none has failed). The pointer is
 * owned by weft and valid until the next weft call on the same thread. A successful call does not
 * clear it. Thread-local; never NULL. */
WEFT_API const char* weft_last_error_message(void);

/* ---------------------------------------------------------------------------------------------- */
/* Data types and shapes                                                                           */
/* ---------------------------------------------------------------------------------------------- */

typedef enum weft_dtype {
  WEFT_DTYPE_BF16 = 0,
  WEFT_DTYPE_F16 = 1,
  WEFT_DTYPE_F32 = 2,
  WEFT_DTYPE_I32 = 3,
  WEFT_DTYPE_I64 = 4,
  WEFT_DTYPE_MAX_ENUM_ = 0x7fffffff /* not a dtype: lets weft reject any int32 >= 0 safely */
} weft_dtype;

/* "bf16", "f16", "f32", "i32", "i64", or "unknown". Static storage; thread-safe. */
WEFT_API const char* weft_dtype_name(weft_dtype dtype);

/* One dimension of a tensor's shape: a fixed size (symbol == NULL, size >= 1) or a named symbol
 * declared on the graph with weft_graph_declare_symbol (symbol != NULL; size is ignored). */
typedef struct weft_dim {
  const char* symbol;
  int64_t size;
} weft_dim;

/* Maximum tensor rank accepted anywhere in the API. */
#define WEFT_MAX_RANK 8

/* ---------------------------------------------------------------------------------------------- */
/* Context                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

typedef struct weft_context weft_context;

typedef struct weft_context_options {
  size_t struct_size; /* sizeof(weft_context_options) */
  /* Reserved for the GPU runtime (device ordinal, cache folder). Leave zero. */
  int32_t reserved;
} weft_context_options;

/* Creates a context. `options` may be NULL for defaults; otherwise options->struct_size must be at least
 * offsetof(weft_context_options, reserved) and fields past struct_size take their defaults.
 * On success *out owns a new context; release it with weft_context_destroy. Graphs keep their context
 * alive, so the context may be destroyed before its graphs.
 * Errors: WEFT_ERROR_INVALID_ARGUMENT (out NULL, bad struct_size). Thread-safe. */
WEFT_API weft_status weft_context_create(const weft_context_options* options, weft_context** out);

/* Releases the caller's reference to a context. NULL is a no-op. Not to be called while another thread
 * uses the same handle. */
WEFT_API void weft_context_destroy(weft_context* context);

/* ---------------------------------------------------------------------------------------------- */
/* Graph building                                                                                  */
/* ---------------------------------------------------------------------------------------------- */

typedef struct weft_graph weft_graph;

/* A tensor of a graph: an integer id, valid only with the graph that made it (using it with another
 * graph is an error naming both). WEFT_TENSOR_NONE marks an absent optional operand. */
typedef uint64_t weft_tensor;
#define WEFT_TENSOR_NONE ((weft_tensor)0)

typedef enum weft_tensor_kind {
  WEFT_TENSOR_INPUT = 0,        /* bound per run, read only (activations, token ids, positions) */
  WEFT_TENSOR_WEIGHT = 1,       /* bound per run, read only, expected to stay the same across runs */
  WEFT_TENSOR_STATE = 2,        /* bound per run, read and written in place (a KV cache) */
  WEFT_TENSOR_INTERMEDIATE = 3, /* produced by an op, owned by weft */
  WEFT_TENSOR_KIND_MAX_ENUM_ = 0x7fffffff
} weft_tensor_kind;

/* Creates an empty graph in `context`. `name` (may be NULL) is a label used in messages and dumps.
 * *out owns the graph; release it with weft_graph_destroy.
 * Errors: WEFT_ERROR_INVALID_HANDLE (context NULL or destroyed), WEFT_ERROR_INVALID_ARGUMENT (out NULL). */
WEFT_API weft_status weft_graph_create(weft_context* context, const char* name, weft_graph** out);

/* Destroys a graph; its tensor ids become invalid. NULL is a no-op. */
WEFT_API void weft_graph_destroy(weft_graph* graph);

/* Declares a symbolic dimension `name` that takes values in [min_value, max_value] (inclusive,
 * 1 <= min_value <= max_value). Dims refer to it by name. Declaring the same name twice is an error.
 * Errors: WEFT_ERROR_INVALID_ARGUMENT (bad name, empty or reversed range, duplicate). */
WEFT_API weft_status weft_graph_declare_symbol(weft_graph* graph, const char* name, int64_t min_value,
                                               int64_t max_value);

/* How a program specializes its kernels for a symbol's values.
 * A kernel compiled for a value U can serve any smaller value by masking (skipping the tiles past it) when the
 * symbol is dim 0 of every tensor it sizes and no op combines values across it (no reduction, slice or
 * concatenation along it): a batch dim, typically. Such a symbol is "maskable". */
typedef enum weft_symbol_policy {
  WEFT_SYMBOL_AUTO = 0,    /* BUCKETS (powers of two) when maskable, else EXACT (the default) */
  WEFT_SYMBOL_EXACT = 1,   /* one kernel per value */
  WEFT_SYMBOL_BUCKETS = 2, /* one kernel per bucket; a value runs on the kernel of the first bucket >= it */
  WEFT_SYMBOL_RUNTIME = 3, /* one kernel (compiled at the maximum) for every value: a value never compiles */
  WEFT_SYMBOL_POLICY_MAX_ENUM_ = 0x7fffffff
} weft_symbol_policy;

/* Sets how programs specialize for symbol `name`. For WEFT_SYMBOL_BUCKETS, `buckets` holds `num_buckets`
 * ascending upper bounds within the symbol's range (the maximum is added when missing); num_buckets == 0 (and
 * buckets NULL) means powers of two. BUCKETS and RUNTIME need a maskable symbol (first 8 symbols of a graph):
 * weft_program_create refuses others, naming the op and tensor in the way. Saved in the graph's JSON; not part
 * of its hash (the kernels for one value are the same under every policy).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (unknown symbol or policy, buckets with another policy, a bucket
 * outside the range or not ascending). */
WEFT_API weft_status weft_graph_set_symbol_policy(weft_graph* graph, const char* name, weft_symbol_policy policy,
                                                  const int64_t* buckets, int32_t num_buckets);

/* Adds a tensor that the caller binds at each run. `kind` is INPUT, WEIGHT or STATE; `name` must be
 * non-empty and unique in the graph; `dims` holds `rank` dims (0 <= rank <= WEFT_MAX_RANK, dims may be
 * NULL when rank is 0). Every fixed dim must be >= 1 and every symbol declared.
 * Errors: WEFT_ERROR_INVALID_ARGUMENT, naming the tensor and the dim at fault. */
WEFT_API weft_status weft_graph_add_tensor(weft_graph* graph, weft_tensor_kind kind, const char* name,
                                           weft_dtype dtype, const weft_dim* dims, int32_t rank,
                                           weft_tensor* out);

/* Adds one op by its name in the op table (see weft_op_count / weft_op_name) — the generic entry that the
 * typed helpers below use. `inputs` holds `num_inputs` operands (WEFT_TENSOR_NONE for an absent optional
 * operand). `attrs_json` is a JSON object of the op's attributes (NULL or "" for all defaults). `name`
 * (may be NULL: one is generated) names the result tensor. The result's dtype and shape are inferred.
 * Errors: WEFT_ERROR_INVALID_ARGUMENT naming the op, the operand and the dim that do not fit, an unknown
 * op or attribute, or a foreign/unknown tensor. */
WEFT_API weft_status weft_graph_add_op(weft_graph* graph, const char* op, const weft_tensor* inputs,
                                       int32_t num_inputs, const char* attrs_json, const char* name,
                                       weft_tensor* out);

/* Marks `tensor` as a graph output named `name` (may be NULL: keeps the tensor's name). An output must be
 * produced by an op; marking the same tensor twice is an error.
 * Errors: WEFT_ERROR_INVALID_ARGUMENT. */
WEFT_API weft_status weft_graph_mark_output(weft_graph* graph, weft_tensor tensor, const char* name);

/* Checks the whole graph: at least one output, every output produced by an op, no cycle, every tensor's
 * shape consistent. Building through this API keeps a graph valid, so this mostly matters for graphs
 * loaded from JSON; running or serializing validates too.
 * Errors: WEFT_ERROR_INVALID_ARGUMENT with the first problem found. */
WEFT_API weft_status weft_graph_validate(const weft_graph* graph);

/* ---------------------------------------------------------------------------------------------- */
/* Typed op helpers (each is weft_graph_add_op with the attributes spelled out)                    */
/* In all of them: `name` may be NULL; *out receives the result. Shapes below use "..." for any    */
/* leading dims; the result has the dtype of the first operand unless said otherwise.              */
/* ---------------------------------------------------------------------------------------------- */

/* table [V, D] (float), ids [...] (i32/i64) -> [..., D]. An id outside [0, V) is a run-time error. */
WEFT_API weft_status weft_op_embedding(weft_graph* g, weft_tensor table, weft_tensor ids, const char* name,
                                       weft_tensor* out);
/* x [..., D], weight [D] -> x / sqrt(mean(x^2) + eps) * weight. */
WEFT_API weft_status weft_op_rmsnorm(weft_graph* g, weft_tensor x, weft_tensor weight, float eps,
                                     const char* name, weft_tensor* out);
/* x [..., H * head_dim], weight [head_dim]: rmsnorm of each head_dim-sized chunk (Qwen3's q/k norm). */
WEFT_API weft_status weft_op_head_rmsnorm(weft_graph* g, weft_tensor x, weft_tensor weight, int64_t head_dim,
                                          float eps, const char* name, weft_tensor* out);
/* x [..., D], weight [D], bias [D] or NONE -> (x - mean) / sqrt(var + eps) * weight + bias. */
WEFT_API weft_status weft_op_layernorm(weft_graph* g, weft_tensor x, weft_tensor weight, weft_tensor bias,
                                       float eps, const char* name, weft_tensor* out);
/* x [..., K], weight [N, K], bias [N] or NONE, residual [..., N] or NONE -> x·weightᵀ + bias + residual. */
WEFT_API weft_status weft_op_linear(weft_graph* g, weft_tensor x, weft_tensor weight, weft_tensor bias,
                                    weft_tensor residual, const char* name, weft_tensor* out);
/* a [..., M, K], b [..., K, N] or [K, N] -> [..., M, N]. */
WEFT_API weft_status weft_op_matmul(weft_graph* g, weft_tensor a, weft_tensor b, const char* name,
                                    weft_tensor* out);
/* Elementwise with NumPy broadcasting. */
WEFT_API weft_status weft_op_add(weft_graph* g, weft_tensor a, weft_tensor b, const char* name, weft_tensor* out);
WEFT_API weft_status weft_op_mul(weft_graph* g, weft_tensor a, weft_tensor b, const char* name, weft_tensor* out);
WEFT_API weft_status weft_op_silu(weft_graph* g, weft_tensor x, const char* name, weft_tensor* out);
/* tanh_approximation != 0 selects GELU's tanh form, else the exact erf form. */
WEFT_API weft_status weft_op_gelu(weft_graph* g, weft_tensor x, int tanh_approximation, const char* name,
                                  weft_tensor* out);
/* SwiGLU: silu(gate) * up. With up == NONE, gate is [..., 2F] holding gate then up -> [..., F];
 * otherwise gate and up are both [..., F]. */
WEFT_API weft_status weft_op_silu_mul(weft_graph* g, weft_tensor gate, weft_tensor up, const char* name,
                                      weft_tensor* out);

typedef enum weft_rope_style {
  WEFT_ROPE_HALF = 0,        /* rotate halves (x[i], x[i + d/2]): Llama / Qwen in HF */
  WEFT_ROPE_INTERLEAVED = 1, /* rotate pairs (x[2i], x[2i+1]): GPT-J style */
  WEFT_ROPE_STYLE_MAX_ENUM_ = 0x7fffffff
} weft_rope_style;

typedef enum weft_rope_scaling {
  WEFT_ROPE_SCALING_NONE = 0,
  WEFT_ROPE_SCALING_LINEAR = 1, /* positions divided by factor */
  WEFT_ROPE_SCALING_LLAMA3 = 2, /* Llama 3.x frequency-dependent scaling */
  WEFT_ROPE_SCALING_MAX_ENUM_ = 0x7fffffff
} weft_rope_scaling;

typedef struct weft_rope_options {
  size_t struct_size; /* sizeof(weft_rope_options) */
  int64_t head_dim;   /* required */
  double theta;       /* base; 0 means 10000 */
  weft_rope_style style;
  weft_rope_scaling scaling;
  /* The fields below are read only for the scalings named; 0 takes the default in brackets. */
  double factor;                 /* LINEAR, LLAMA3 [8] */
  double low_freq_factor;        /* LLAMA3 [1] */
  double high_freq_factor;       /* LLAMA3 [4] */
  int64_t original_max_position; /* LLAMA3 [8192] */
} weft_rope_options;

/* x [..., H * head_dim], positions [...] (i32/i64, x's shape without its last dim) -> rotated x. */
WEFT_API weft_status weft_op_rope(weft_graph* g, weft_tensor x, weft_tensor positions,
                                  const weft_rope_options* options, const char* name, weft_tensor* out);

typedef struct weft_attention_options {
  size_t struct_size; /* sizeof(weft_attention_options) */
  int64_t num_q_heads;
  int64_t num_kv_heads; /* num_q_heads must be a multiple of it (GQA) */
  int64_t head_dim;
  double scale; /* 0 means 1/sqrt(head_dim) */
} weft_attention_options;

/* One decode step of attention for B sequences.
 * q [B, Hq*hd], k_new and v_new [B, Hkv*hd], k_cache and v_cache [B, S, Hkv, hd] (STATE tensors),
 * positions [B] (i32/i64). For each row b, writes k_new/v_new into the caches at positions[b], then
 * attends q over cache positions [0, positions[b]] inclusive. -> [B, Hq*hd].
 * A position outside [0, S) is a run-time error naming the row. */
WEFT_API weft_status weft_op_attention_decode(weft_graph* g, weft_tensor q, weft_tensor k_new, weft_tensor v_new,
                                              weft_tensor k_cache, weft_tensor v_cache, weft_tensor positions,
                                              const weft_attention_options* options, const char* name,
                                              weft_tensor* out);
/* Softmax over the last dim. */
WEFT_API weft_status weft_op_softmax(weft_graph* g, weft_tensor x, const char* name, weft_tensor* out);
/* x [..., N] -> [...] of `dtype` (I32 or I64): index of the first maximum of the last dim. */
WEFT_API weft_status weft_op_argmax(weft_graph* g, weft_tensor x, weft_dtype dtype, const char* name,
                                    weft_tensor* out);

typedef enum weft_reduce_kind {
  WEFT_REDUCE_SUM = 0,
  WEFT_REDUCE_MAX = 1,
  WEFT_REDUCE_MEAN = 2,
  WEFT_REDUCE_KIND_MAX_ENUM_ = 0x7fffffff
} weft_reduce_kind;

/* Reduces `axis` (negative counts from the end); keepdim != 0 keeps it as size 1. */
WEFT_API weft_status weft_op_reduce(weft_graph* g, weft_tensor x, weft_reduce_kind kind, int32_t axis,
                                    int keepdim, const char* name, weft_tensor* out);
/* Converts to `dtype` (float -> int truncates toward zero). */
WEFT_API weft_status weft_op_cast(weft_graph* g, weft_tensor x, weft_dtype dtype, const char* name,
                                  weft_tensor* out);
/* Same elements, new shape (element counts must match, symbols included). */
WEFT_API weft_status weft_op_reshape(weft_graph* g, weft_tensor x, const weft_dim* dims, int32_t rank,
                                     const char* name, weft_tensor* out);
/* Elements [start, end) of `axis` (negative axis counts from the end). */
WEFT_API weft_status weft_op_slice(weft_graph* g, weft_tensor x, int32_t axis, int64_t start, int64_t end,
                                   const char* name, weft_tensor* out);
/* Joins `num_inputs` tensors along `axis`; other dims must match. */
WEFT_API weft_status weft_op_concat(weft_graph* g, const weft_tensor* inputs, int32_t num_inputs, int32_t axis,
                                    const char* name, weft_tensor* out);

/* ---------------------------------------------------------------------------------------------- */
/* Introspection, identity and serialization                                                        */
/* ---------------------------------------------------------------------------------------------- */

/* Number of ops in the op table, and the name of op `index` (static storage; NULL if out of range). */
WEFT_API int32_t weft_op_count(void);
WEFT_API const char* weft_op_name(int32_t index);

typedef struct weft_tensor_info {
  size_t struct_size; /* set by the caller to sizeof(weft_tensor_info) */
  const char* name;   /* owned by the graph, valid until it is destroyed */
  weft_tensor_kind kind;
  weft_dtype dtype;
  int32_t rank;
  weft_dim dims[WEFT_MAX_RANK]; /* symbol names owned by the graph */
  int32_t is_output;
} weft_tensor_info;

/* Describes `tensor`. info->struct_size must be set. Errors: INVALID_HANDLE, INVALID_ARGUMENT. */
WEFT_API weft_status weft_graph_tensor_info(const weft_graph* graph, weft_tensor tensor, weft_tensor_info* info);

/* Looks a tensor up by name. Errors: INVALID_ARGUMENT if no tensor has that name. */
WEFT_API weft_status weft_graph_find_tensor(const weft_graph* graph, const char* name, weft_tensor* out);

/* Number of graph outputs and the id of output `index` (in marking order). */
WEFT_API weft_status weft_graph_num_outputs(const weft_graph* graph, int32_t* out);
WEFT_API weft_status weft_graph_output(const weft_graph* graph, int32_t index, weft_tensor* out);

/* The canonical JSON of the graph (stable across runs and processes; weft_graph_from_json reads it back).
 * *out_json is owned by the graph and valid until the graph is next modified or destroyed. */
WEFT_API weft_status weft_graph_to_json(const weft_graph* graph, const char** out_json);

/* A readable listing of the graph (symbols, tensors, ops). Same ownership as weft_graph_to_json. */
WEFT_API weft_status weft_graph_to_text(const weft_graph* graph, const char** out_text);

/* XXH3-128 of the graph's structure: ops, attributes, dtypes, dims, symbol ranges and wiring. Tensor and
 * symbol names are left out (renaming changes no computation). out[0] is the low, out[1] the high half. */
WEFT_API weft_status weft_graph_hash(const weft_graph* graph, uint64_t out[2]);

/* Builds a graph from canonical JSON (as weft_graph_to_json writes it) and validates it. A malformed
 * document is an error naming the field at fault. *out owns the new graph. */
WEFT_API weft_status weft_graph_from_json(weft_context* context, const char* json, weft_graph** out);

/* ---------------------------------------------------------------------------------------------- */
/* CPU reference interpreter                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* A strided view of memory: host memory for the reference interpreter, device memory for programs. strides
 * (in elements) may be NULL for a dense row-major layout; programs accept dense layouts only. */
typedef struct weft_tensor_view {
  void* data;
  weft_dtype dtype;
  int32_t rank;
  const int64_t* shape;
  const int64_t* strides;
} weft_tensor_view;

/* A tensor bound to memory for one run. */
typedef struct weft_binding {
  weft_tensor tensor;
  weft_tensor_view value;
} weft_binding;

/* Fills *out as a view of a DLPack tensor (host: kDLCPU, kDLCUDAHost; device: kDLCUDA, kDLCUDAManaged) with a
 * dtype weft knows.
 * `dltensor` points to a `DLTensor` (dlpack.h); it is typed void* because DLPack releases disagree on
 * whether the struct has a tag, and weft does not make callers include dlpack.h. The view borrows the
 * DLTensor's data, shape and strides: keep it alive while *out is used.
 * Errors: INVALID_ARGUMENT naming what is unsupported (device type, dtype, lanes). */
WEFT_API weft_status weft_tensor_view_from_dlpack(const void* dltensor, weft_tensor_view* out);

/* Runs the graph on the CPU reference interpreter (fp32 arithmetic, results rounded to each tensor's
 * dtype, as the GPU stores them). Every INPUT, WEIGHT, STATE and output tensor must be bound exactly once.
 * Symbol values are taken from the bound shapes and must agree everywhere and lie in their ranges.
 * Outputs are written to their bindings; STATE tensors are updated in place. Memory stays owned by the
 * caller. The graph is only read: several threads may run the same graph at once.
 * Errors: INVALID_ARGUMENT naming the tensor and dim that do not fit, or the op whose run-time
 * precondition failed (an id or position out of range). Outputs may be partly written on error. */
WEFT_API weft_status weft_graph_run_reference(const weft_graph* graph, const weft_binding* bindings,
                                              int32_t num_bindings);


/* ---------------------------------------------------------------------------------------------- */
/* Compiling: graph -> persistent megakernel cubin (NVRTC + nvJitLink), through the kernel cache    */
/* ---------------------------------------------------------------------------------------------- */

typedef struct weft_compile_options {
  size_t struct_size;   /* sizeof(weft_compile_options) */
  const char* arch;     /* "sm_80", "sm_90a" or "sm_100a"; NULL means "sm_90a" */
  int32_t num_sms;      /* queues / persistent blocks; 0 means the arch's usual SM count */
  int32_t disable_cache; /* nonzero: neither read nor write the kernel cache */
} weft_compile_options;

typedef struct weft_compile_report {
  size_t struct_size; /* set by the caller to sizeof(weft_compile_report) */
  int64_t num_tasks, num_events, num_queues, arena_bytes, cubin_bytes;
  double total_ms;    /* the whole call */
  double lower_ms;    /* lowering, memory plan, schedule and verification (0 on a cache hit) */
  double compile_ms;  /* NVRTC + nvJitLink (0 on a cache hit) */
  int32_t cache_hit;
  char key[33];       /* the cache key, 32 hex digits */
} weft_compile_report;

/* Compiles `graph` for every symbol at its maximum, without a GPU: lowering into tile tasks, verification on
 * the CPU simulator, code generation, NVRTC + nvJitLink, all behind the kernel cache ($WEFT_CACHE_DIR, default
 * $XDG_CACHE_HOME/weft; WEFT_CACHE=off disables it). `options` may be NULL. Fills *report.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT, UNSUPPORTED (an op instance the device library cannot run),
 * COMPILE (with the NVRTC / nvJitLink log), CACHE (a cache folder that is not private to the user).
 * Thread-safety: the graph is only read. */
WEFT_API weft_status weft_graph_compile(const weft_graph* graph, const weft_compile_options* options,
                                        weft_compile_report* report);

/* ---------------------------------------------------------------------------------------------- */
/* Programs: a compiled graph loaded on a GPU                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* Number of CUDA devices. Without a driver or GPU: *out = 0 and WEFT_ERROR_CUDA with the reason. */
WEFT_API weft_status weft_device_count(int32_t* out);

typedef struct weft_program weft_program;

typedef struct weft_program_options {
  size_t struct_size;     /* sizeof(weft_program_options) */
  int32_t device_ordinal; /* >= 0: that device's primary context; -1: the calling thread's current context
                             (or device 0 when none is current) */
  const char* arch;       /* NULL: the device's own */
  int32_t watchdog_ms;    /* 0: $WEFT_WATCHDOG_MS, else 5000 */
  int32_t disable_cache;  /* nonzero: no kernel cache */
  int32_t max_loaded_kernels; /* specializations kept loaded on the device (least recently used unloaded
                                 beyond it); 0: 8 */
  int32_t lazy;               /* nonzero: a run whose specialization is not loaded yet runs on the generic
                                 kernel (every maskable symbol at its maximum) while the specialization compiles
                                 on a background thread, instead of waiting for the compile */
} weft_program_options;

/* Creates a program for `graph` (copied: later changes to the graph do not affect it). Kernels are compiled per
 * concrete shape on the first run that needs them. `options` may be NULL (device -1, defaults).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT, CUDA (no driver or device), CACHE.
 * *out owns the program; release it with weft_program_destroy. */
WEFT_API weft_status weft_program_create(const weft_graph* graph, const weft_program_options* options,
                                         weft_program** out);

/* Waits for the program's launches to finish, then frees it. NULL is a no-op. */
WEFT_API void weft_program_destroy(weft_program* program);

/* Runs the graph once on `stream` (a CUstream; NULL is the legacy default stream). Every INPUT, WEIGHT, STATE
 * and output tensor is bound once to dense device memory (caller-owned, valid until the run completes).
 * Checks dtypes, shapes and symbol ranges before launching (with JIT-compiled host code where available);
 * compiles (or loads from the cache) the kernel for a new specialization (see weft_symbol_policy), which blocks
 * unless the program is lazy; otherwise does no host synchronization. Device-side failures (the watchdog, an id
 * or position out of range) are reported by the next weft_program_synchronize.
 * Thread-safety: calls on one program are serialized; run a program on one stream at a time. */
WEFT_API weft_status weft_program_run(weft_program* program, const weft_binding* bindings, int32_t num_bindings,
                                      void* stream);

/* What a program has done so far. */
typedef struct weft_program_stats {
  size_t struct_size;       /* set by the caller to sizeof(weft_program_stats) */
  int64_t compiles;         /* specializations compiled (kernel cache misses) */
  int64_t cache_loads;      /* specializations loaded from the kernel cache */
  int64_t evictions;        /* specializations unloaded to stay within max_loaded_kernels */
  int64_t generic_runs;     /* lazy mode: runs served by the generic kernel while theirs compiled */
  int64_t pending;          /* specializations compiling in the background now */
  int64_t loaded;           /* specializations loaded now */
  int32_t host_jit;         /* nonzero: runs are checked and planned by JIT-compiled host code (LLVM ORC) */
  int32_t host_jit_cache_hit; /* nonzero: that code's object was loaded from the kernel cache */
  double host_jit_ms;       /* generating + compiling (or loading) it, at weft_program_create */
} weft_program_stats;

/* Fills *out (out->struct_size must be set). Finished background compiles are taken in first.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT. Thread-safety: as weft_program_run. */
WEFT_API weft_status weft_program_get_stats(weft_program* program, weft_program_stats* out);

/* Waits for `stream` and reports a device-side failure of an earlier run: WEFT_ERROR_DEADLOCK (the watchdog
 * stopped a task that waited longer than the bound; the message names the task and the event) or
 * WEFT_ERROR_INVALID_ARGUMENT (an embedding id or attention position out of range, naming the row). The
 * program stays usable afterwards. */
WEFT_API weft_status weft_program_synchronize(weft_program* program, void* stream);


/* ---------------------------------------------------------------------------------------------- */
/* Models: Hugging Face Llama / Qwen3 folders, greedy generation                                    */
/* ---------------------------------------------------------------------------------------------- */

typedef struct weft_model weft_model;

typedef enum weft_backend {
  WEFT_BACKEND_AUTO = 0,      /* the GPU when one is usable, else the CPU reference */
  WEFT_BACKEND_GPU = 1,
  WEFT_BACKEND_REFERENCE = 2, /* the CPU reference interpreter (slow; for small models and for checking) */
  WEFT_BACKEND_MAX_ENUM_ = 0x7fffffff
} weft_backend;

typedef struct weft_model_options {
  size_t struct_size;     /* sizeof(weft_model_options) */
  weft_backend backend;   /* default AUTO */
  int32_t device_ordinal; /* GPU: as weft_program_options.device_ordinal (0 here means device 0) */
  int32_t max_batch;      /* largest batch a generate call may use; 0: 8 */
  int32_t max_seq;        /* KV-cache length (prompt + generated tokens); 0: min(max_position_embeddings, 4096) */
  int32_t watchdog_ms;    /* GPU: 0: $WEFT_WATCHDOG_MS, else 5000 */
  int32_t disable_cache;  /* nonzero: no kernel cache */
} weft_model_options;

/* Loads the Hugging Face model folder `dir`: config.json (model_type "llama" or "qwen3") and model.safetensors
 * or the shards named by model.safetensors.index.json (memory-mapped). Builds the decode-step graph
 * (embedding -> layers -> final norm -> lm_head -> argmax, batch symbolic) and, on the GPU, uploads the
 * weights. `options` may be NULL. Errors: INVALID_ARGUMENT naming the file, config field or tensor at fault
 * (a missing tensor, a wrong shape or dtype, a truncated file, an unsupported model_type); CUDA when the GPU
 * backend was asked for and none is usable; OUT_OF_MEMORY. *out owns the model: weft_model_destroy.
 * Thread-safety: `context` may be shared; the model is independent of other handles. */
WEFT_API weft_status weft_model_load(weft_context* context, const char* dir, const weft_model_options* options,
                                     weft_model** out);

/* Waits for the model's GPU work, frees it (device memory, mappings). NULL is a no-op. */
WEFT_API void weft_model_destroy(weft_model* model);

typedef struct weft_model_info {
  size_t struct_size;   /* set by the caller to sizeof(weft_model_info) */
  char model_type[16];  /* "llama" or "qwen3" */
  int32_t layers, hidden, q_heads, kv_heads, head_dim, ffn, vocab;
  int32_t max_batch, max_seq;
  weft_backend backend; /* GPU or REFERENCE (never AUTO) */
  char device[128];     /* what runs it, e.g. "NVIDIA H100 80GB HBM3 (sm_90a, 132 SMs)" */
  int64_t weight_bytes;
} weft_model_info;

/* Fills *info. Errors: INVALID_HANDLE, INVALID_ARGUMENT (struct_size too small). */
WEFT_API weft_status weft_model_get_info(const weft_model* model, weft_model_info* info);

/* Compiles the model's megakernel for `batch` rows through the kernel cache (GPU: for the model's device,
 * and loads it so that generation does not wait for it; REFERENCE: for sm_90a, without a GPU). Fills *report
 * (may be NULL). Errors: INVALID_ARGUMENT (batch outside 1..max_batch), COMPILE, CACHE, CUDA. */
WEFT_API weft_status weft_model_compile(weft_model* model, int32_t batch, weft_compile_report* report);

/* weft_generate_request.on_step: called after each generation step with its tokens[batch]; see there. */
typedef int32_t (*weft_step_fn)(void* on_step_user, int32_t step, const int32_t* tokens, int32_t batch);

typedef struct weft_generate_request {
  size_t struct_size;          /* sizeof(weft_generate_request) */
  int32_t batch;               /* rows, 1..max_batch */
  int32_t prompt_len;          /* tokens per row, >= 1; prompt_len + steps - 1 <= max_seq */
  int32_t steps;               /* tokens to generate per row, >= 1 */
  const int32_t* prompt_ids;   /* [batch][prompt_len], read */
  const int32_t* forced_ids;   /* NULL, or [batch][steps]: step j >= 1 consumes forced_ids[b][j-1] instead of the
                                  previous argmax (teacher forcing); the last column is not used */
  int32_t multi_step;          /* nonzero: every generation step in one kernel launch, each argmax fed back on the
                                  device (not with out_logits); with on_step the kernel hands each step's tokens
                                  to the host as it goes, and with forced_ids it waits at every step for the host
                                  to hand it the next tokens (a round trip of a few us, not a launch); zero: one
                                  launch per step */
  int32_t* out_tokens;         /* [batch][steps], written: the argmax of each step; -1 past the steps run */
  float* out_logits;           /* NULL, or [steps][batch][vocab] written: each step's logits widened to f32 */
  float* out_step_ms;          /* NULL, or [steps] written: per-step latency in ms (GPU: CUDA events; multi-step:
                                  the launch's time divided by the steps run) */
  /* NULL, or called on the calling thread after every generation step, in order, with the step's argmax
     (tokens[batch], valid during the call) and on_step_user: return 0 to go on, nonzero to stop after this
     step (report->steps_done says how many ran). In step mode each call comes after its step's launch has
     finished. With multi_step the kernel runs the next step while the call runs (without forced_ids) and a stop
     ends it after that step, whose tokens are dropped; the call must return within that step plus half the
     model's watchdog time (weft_model_options.watchdog_ms; with forced_ids, where the kernel waits for every
     call: within the watchdog time), else the run fails with WEFT_ERROR_DEADLOCK. With multi_step the calling
     thread spins while it waits for each step (one core busy for the generation), so that the tokens reach it
     within microseconds. It must not call weft_model_* functions on the same model. */
  weft_step_fn on_step;
  void* on_step_user;
} weft_generate_request;

typedef struct weft_generate_report {
  size_t struct_size;  /* set by the caller to sizeof(weft_generate_report) */
  double prefill_ms;   /* the prompt minus its last token, one step per position */
  double decode_ms;    /* all generation steps run */
  int32_t steps_done;  /* steps run: `steps`, or fewer when on_step stopped early (written when struct_size
                          covers it: callers built against older headers get the fields above) */
} weft_generate_report;

/* Greedy generation: prefills each row's prompt (the KV cache starts empty every call), then generates `steps`
 * tokens per row. Blocks until done. The first call for a batch size compiles (see weft_model_compile).
 * `report` may be NULL. Errors: INVALID_ARGUMENT naming the field, row and column (an id outside the vocab, sizes
 * outside the model's limits), DEADLOCK / CUDA from the device. Thread-safety: calls on one model are
 * serialized internally (one generation at a time per model). */
WEFT_API weft_status weft_model_generate(weft_model* model, const weft_generate_request* request,
                                         weft_generate_report* report);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WEFT_WEFT_H */
