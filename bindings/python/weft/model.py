"""weft_model: a Hugging Face Llama / Qwen3 folder loaded for greedy generation."""
import ctypes

import numpy as np

from . import _structs as S
from ._handle import Handle
from ._lib import check, invalid, lib
from .context import Context
from .reports import CompileReport, Generation, ModelInfo

_BACKENDS = {"auto": 0, "gpu": 1, "reference": 2}
_BACKEND_NAMES = {1: "gpu", 2: "reference"}


def _rows(values, what):
    """A C-contiguous int32 [rows, cols] copy of a list of rows or a 2-D array."""
    try:
        a = np.ascontiguousarray(np.asarray(values, dtype=np.int64))
    except ValueError as e:  # ragged lists
        raise invalid(f"{what}: {e}; expected rows of one length") from None
    if a.ndim != 2:
        raise invalid(f"{what} has {a.ndim} dims; expected [batch, tokens]")
    if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
        raise invalid(f"{what} holds a value outside int32")
    return np.ascontiguousarray(a.astype(np.int32))


class Model(Handle):
    """A model folder (config.json + safetensors) loaded by weft_model_load.

    backend: "auto" (GPU when usable, else the CPU reference), "gpu" or "reference"."""

    _destroy_fn = "weft_model_destroy"
    _kind = "model"

    def __init__(self, path, context=None, backend="auto", device=0, max_batch=0, max_seq=0, watchdog_ms=0,
                 disable_cache=False):
        if backend not in _BACKENDS:
            raise invalid(f"backend is '{backend}'; expected one of {', '.join(_BACKENDS)}")
        opts = S.ModelOptions.new(backend=_BACKENDS[backend], device_ordinal=int(device), max_batch=int(max_batch),
                                  max_seq=int(max_seq), watchdog_ms=int(watchdog_ms),
                                  disable_cache=1 if disable_cache else 0)
        own = context is None
        ctx = Context() if own else context
        out = ctypes.c_void_p()
        try:
            check(lib().weft_model_load(ctx._h(), str(path).encode(), ctypes.byref(opts), ctypes.byref(out)))
        finally:
            if own:
                ctx.close()  # the model does not need the caller's context reference afterwards
        super().__init__(out)

    def info(self):
        i = S.ModelInfo.new()
        check(lib().weft_model_get_info(self._h(), ctypes.byref(i)))
        return ModelInfo(i.model_type.decode(), i.layers, i.hidden, i.q_heads, i.kv_heads, i.head_dim, i.ffn,
                         i.vocab, i.max_batch, i.max_seq, _BACKEND_NAMES.get(i.backend, str(i.backend)),
                         i.device.decode(), i.weight_bytes)

    def compile(self, batch):
        """Compiles (through the kernel cache) the decode megakernel for `batch` rows."""
        r = S.CompileReport.new()
        check(lib().weft_model_compile(self._h(), int(batch), ctypes.byref(r)))
        return CompileReport._from_c(r)

    def generate(self, prompts, steps, forced_ids=None, multi_step=False, return_logits=False, on_step=None):
        """Greedy generation: `prompts` is [batch, prompt_len] token ids (list of rows or array). forced_ids
        ([batch, steps]) feeds step j >= 1 with forced_ids[:, j-1] instead of the previous argmax.
        on_step(step, tokens) is called after every step with its tokens (int32 array [batch], a copy); a return
        of False stops the generation there (Generation.steps_done). With multi_step the kernel stays resident
        and runs the next step while the call runs (a call must return within about a step plus half the
        model's watchdog time); an exception raised in it stops the generation and is raised again here."""
        ids = _rows(prompts, "prompts")
        batch, prompt_len = ids.shape
        steps = int(steps)
        forced = None if forced_ids is None else _rows(forced_ids, "forced_ids")
        if forced is not None and forced.shape != (batch, steps):
            raise invalid(f"forced_ids has shape {list(forced.shape)}; expected [{batch}, {steps}] (batch, steps)")
        n = max(steps, 0)
        tokens = np.zeros((batch, n), dtype=np.int32)
        step_ms = np.zeros(n, dtype=np.float32)
        logits = np.zeros((n, batch, self.info().vocab), dtype=np.float32) if return_logits else None
        p_i32 = ctypes.POINTER(ctypes.c_int32)
        p_f32 = ctypes.POINTER(ctypes.c_float)
        req = S.GenerateRequest.new(
            batch=batch, prompt_len=prompt_len, steps=steps, prompt_ids=ids.ctypes.data_as(p_i32),
            forced_ids=forced.ctypes.data_as(p_i32) if forced is not None else None,
            multi_step=1 if multi_step else 0, out_tokens=tokens.ctypes.data_as(p_i32),
            out_logits=logits.ctypes.data_as(p_f32) if logits is not None else None,
            out_step_ms=step_ms.ctypes.data_as(p_f32))
        raised = []
        if on_step is not None:
            def trampoline(_user, step, toks, n):
                if raised:
                    return 1
                try:
                    go_on = on_step(int(step), np.ctypeslib.as_array(toks, shape=(int(n),)).copy())
                    return 1 if go_on is False else 0
                except BaseException as e:  # raised again below, after the library has ended the run
                    raised.append(e)
                    return 1
            req.on_step = S.StepCallback(trampoline)  # kept alive by req until the call returns
        report = S.GenerateReport.new()
        status = lib().weft_model_generate(self._h(), ctypes.byref(req), ctypes.byref(report))
        if raised:
            raise raised[0]
        check(status)
        return Generation(tokens, step_ms, report.prefill_ms, report.decode_ms, logits, report.steps_done)
