"""Plain-data results of weft calls."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class CompileReport:
    """weft_compile_report: what compiling a graph (or a model for one batch size) produced."""

    num_tasks: int
    num_events: int
    num_queues: int
    arena_bytes: int
    cubin_bytes: int
    total_ms: float
    lower_ms: float  # 0 on a cache hit
    compile_ms: float  # NVRTC + nvJitLink; 0 on a cache hit
    cache_hit: bool
    key: str  # the kernel cache key, 32 hex digits

    @classmethod
    def _from_c(cls, r):
        return cls(r.num_tasks, r.num_events, r.num_queues, r.arena_bytes, r.cubin_bytes, r.total_ms, r.lower_ms,
                   r.compile_ms, bool(r.cache_hit), r.key.decode())


@dataclasses.dataclass(frozen=True)
class ProgramStats:
    """weft_program_stats: what a program has done so far (Program.stats())."""

    compiles: int  # specializations compiled (kernel cache misses)
    cache_loads: int  # specializations loaded from the kernel cache
    evictions: int  # specializations unloaded to stay within max_loaded_kernels
    generic_runs: int  # lazy mode: runs served by the generic kernel while theirs compiled
    pending: int  # specializations compiling in the background now
    loaded: int  # specializations loaded now
    host_jit: bool  # runs are checked and planned by JIT-compiled host code (LLVM ORC)
    host_jit_cache_hit: bool  # that code's object was loaded from the kernel cache
    host_jit_ms: float  # generating + compiling (or loading) it, at program creation

    @classmethod
    def _from_c(cls, s):
        return cls(s.compiles, s.cache_loads, s.evictions, s.generic_runs, s.pending, s.loaded, bool(s.host_jit),
                   bool(s.host_jit_cache_hit), s.host_jit_ms)


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """weft_tensor_info: a graph tensor's name, kind, dtype and shape (ints and symbol names)."""

    name: str
    kind: int  # a graph.TensorKind
    dtype: int  # a dtypes.DType
    shape: tuple  # ints (sizes) and strs (symbol names)
    is_output: bool


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """weft_model_info: a loaded model's shape and what runs it."""

    model_type: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    max_batch: int
    max_seq: int
    backend: str  # "gpu" or "reference"
    device: str
    weight_bytes: int


@dataclasses.dataclass
class Generation:
    """The result of Model.generate. tokens is [batch, steps] int32 (-1 past steps_done when on_step stopped
    the generation); logits [steps, batch, vocab] float32 when asked for; step_ms has one latency per step."""

    tokens: object
    step_ms: object
    prefill_ms: float
    decode_ms: float
    logits: object = None
    steps_done: int = 0
