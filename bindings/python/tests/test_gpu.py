"""Programs on a GPU against the CPU reference. Every test but the first needs a CUDA device and skips,
saying why, without one."""
import time

import numpy as np
import pytest
import torch

import weft
from helpers import build_decoder_block, build_mlp, decoder_values, gpu_skip_reason, mlp_values


def test_program_without_a_gpu_raises_weft_cuda_error():
    if gpu_skip_reason() is None:
        pytest.skip("a CUDA device is present: this checks the error without one")
    with pytest.raises(weft.CudaError) as e:
        weft.Program(build_mlp())
    assert e.value.status == weft.Status.CUDA and "weft_program_create" in e.value.message


class _CudaArrayInterfaceOnly:
    def __init__(self, t):
        self.__cuda_array_interface__ = t.__cuda_array_interface__
        self._t = t


class _DLPackOnly:
    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_mlp_program_matches_reference(gpu, rng):
    g = build_mlp()
    v = mlp_values(rng, batch=6)
    expected = g.run_reference(v)["y"]
    with weft.Program(g) as p:
        dev = {k: torch.from_numpy(a).cuda() for k, a in v.items()}
        y = p.run(dev)["y"]  # allocated by torch on the device, launched on torch's current stream
        p.synchronize()
        assert y.is_cuda and y.shape == (6, 32)
        np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=2e-3, atol=2e-3)


def test_program_on_a_side_stream_and_other_array_protocols(gpu, rng):
    g = build_mlp()
    v = mlp_values(rng, batch=3)
    expected = g.run_reference(v)["y"]
    dev = {k: torch.from_numpy(a).cuda() for k, a in v.items()}
    bindings = {"x": _CudaArrayInterfaceOnly(dev["x"]), "w1": _DLPackOnly(dev["w1"]), "b1": dev["b1"],
                "w2": dev["w2"], "b2": dev["b2"]}
    y = torch.zeros(3, 32, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with weft.Program(g) as p:
        p.run(bindings, stream=stream, y=_DLPackOnly(y))
        p.synchronize(stream)
    np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=2e-3, atol=2e-3)


def test_graph_run_picks_the_program_for_device_memory(gpu, rng):
    g = build_mlp()
    v = mlp_values(rng)
    expected = g.run(v)["y"]  # host memory: the reference interpreter
    assert isinstance(expected, np.ndarray)
    y = g.run({k: torch.from_numpy(a).cuda() for k, a in v.items()})["y"]
    torch.cuda.synchronize()
    assert y.is_cuda
    np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=2e-3, atol=2e-3)
    g.close()  # closes the cached program too


def _settled_stats(p, timeout_s=300):
    """p.stats() once no specialization compiles in the background any more."""
    deadline = time.monotonic() + timeout_s
    s = p.stats()
    while s.pending and time.monotonic() < deadline:
        time.sleep(0.05)
        s = p.stats()
    return s


def test_lazy_program_runs_on_the_generic_kernel_and_reports_stats(gpu, rng):
    g = build_mlp()
    g.set_symbol_policy("batch", "buckets", [4, 16])  # batch 3 runs on the kernel for 4; the generic one is 64
    v = mlp_values(rng, batch=3)
    expected = g.run_reference(v)["y"]
    dev = {k: torch.from_numpy(a).cuda() for k, a in v.items()}
    with weft.Program(g, lazy=True, max_loaded_kernels=4) as p:
        s = p.stats()
        assert isinstance(s, weft.ProgramStats)
        assert (s.compiles, s.cache_loads, s.evictions, s.generic_runs, s.pending, s.loaded) == (0, 0, 0, 0, 0, 0)
        assert isinstance(s.host_jit, bool) and isinstance(s.host_jit_cache_hit, bool)
        assert isinstance(s.host_jit_ms, float) and s.host_jit_ms >= 0
        assert s.host_jit or (not s.host_jit_cache_hit and s.host_jit_ms == 0)

        y = p.run(dev)["y"]  # the kernel for 4 is not loaded: the generic kernel serves the run
        p.synchronize()
        np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=2e-3, atol=2e-3)
        s = p.stats()
        assert s.generic_runs == 1 and s.evictions == 0
        assert s.compiles + s.cache_loads >= 1 and s.loaded >= 1  # the generic kernel, at least
        s = _settled_stats(p)
        assert s.pending == 0, "the background compile did not finish"
        assert s.loaded == 2 and s.compiles + s.cache_loads == 2  # generic + the specialization for 4

        y = p.run(dev)["y"]  # now on its own specialization
        p.synchronize()
        np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=2e-3, atol=2e-3)
        assert p.stats().generic_runs == 1
    with pytest.raises(weft.InvalidHandleError, match="closed"):
        p.stats()


def test_max_loaded_kernels_evicts_the_least_recently_used(gpu, rng):
    g = build_mlp()
    g.set_symbol_policy("batch", "buckets", [4, 16])
    with weft.Program(g, max_loaded_kernels=1) as p:
        for batch in (3, 10):  # buckets 4 and 16: the second unloads the first
            v = mlp_values(rng, batch=batch)
            y = p.run({k: torch.from_numpy(a).cuda() for k, a in v.items()})["y"]
            p.synchronize()
            np.testing.assert_allclose(y.cpu().numpy(), g.run_reference(v)["y"], rtol=2e-3, atol=2e-3)
        s = p.stats()
        assert (s.loaded, s.evictions, s.generic_runs, s.pending) == (1, 1, 0, 0)
        assert s.compiles + s.cache_loads == 2


def test_program_refuses_host_memory(gpu, rng):
    with weft.Program(build_mlp()) as p:
        with pytest.raises(weft.InvalidArgumentError, match="host memory"):
            p.run(mlp_values(rng))


def test_decoder_block_program_matches_reference(gpu, rng):
    g = build_decoder_block()
    host = decoder_values(rng)
    dev = {k: t.cuda() for k, t in host.items()}
    ref = g.run_reference(host)
    with weft.Program(g) as p:
        out = p.run(dev)
        p.synchronize()
    scale = ref["logits"].float().abs().max().item()
    np.testing.assert_allclose(out["logits"].float().cpu().numpy(), ref["logits"].float().numpy(),
                               atol=3e-2 * scale)
    np.testing.assert_allclose(dev["k_cache"].float().cpu().numpy(), host["k_cache"].float().numpy(), atol=3e-2)


def test_torch_compile_on_cuda(gpu):
    import weft.torch as wt

    torch._dynamo.reset()
    wt.stats.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(), torch.nn.Linear(128, 64)).cuda().eval()
    x = torch.randn(8, 64, device="cuda")
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model, backend="weft")(x)
    torch.testing.assert_close(got, expected, atol=2e-3, rtol=2e-3)
    assert wt.stats.weft_runs == 1 and wt.stats.fallbacks == 0, wt.stats


def test_model_on_gpu_matches_reference(gpu, tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128,
                                   max_position_embeddings=64, bos_token_id=None, eos_token_id=None,
                                   pad_token_id=0)
    torch.manual_seed(12)
    transformers.LlamaForCausalLM(cfg).save_pretrained(tmp_path)
    prompts = [[1, 2, 3, 4], [7, 7, 7, 7]]
    with weft.Model(tmp_path, backend="reference") as ref, weft.Model(tmp_path, backend="gpu") as gpu_model:
        assert gpu_model.info().backend == "gpu"
        a = ref.generate(prompts, 4, return_logits=True)
        b = gpu_model.generate(prompts, 4, return_logits=True)
    np.testing.assert_allclose(b.logits, a.logits, atol=2e-3, rtol=2e-3)
