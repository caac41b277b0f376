"""The Python twin of samples/mlp.c: a two-layer MLP (linear -> gelu -> linear) with a symbolic batch, built
through weft, printed, run on the CPU reference interpreter (and on the GPU when there is one), compiled for
sm_90a, and then the same network run through torch.compile(backend="weft").

    WEFT_LIBRARY=build/libweft.so python bindings/python/examples/mlp.py
"""
import numpy as np

import weft

BATCH, D_IN, D_HIDDEN, D_OUT = 4, 64, 128, 32


def build():
    g = weft.Graph("mlp")
    g.declare_symbol("batch", 1, 64)
    x = g.input("x", "f32", ["batch", D_IN])
    w1, b1 = g.weight("w1", "f32", [D_HIDDEN, D_IN]), g.weight("b1", "f32", [D_HIDDEN])
    w2, b2 = g.weight("w2", "f32", [D_OUT, D_HIDDEN]), g.weight("b2", "f32", [D_OUT])
    a = g.gelu(g.linear(x, w1, b1, name="h"), approximate="tanh", name="a")
    g.mark_output(g.linear(a, w2, b2, name="y"))
    return g


def main():
    print("weft", weft.version())
    rng = np.random.default_rng(0)
    values = {"x": rng.uniform(-1, 1, (BATCH, D_IN)), "w1": rng.uniform(-0.125, 0.125, (D_HIDDEN, D_IN)),
              "b1": rng.uniform(-0.1, 0.1, D_HIDDEN), "w2": rng.uniform(-0.09, 0.09, (D_OUT, D_HIDDEN)),
              "b2": rng.uniform(-0.1, 0.1, D_OUT)}
    values = {k: v.astype(np.float32) for k, v in values.items()}

    with build() as g:
        print(g.text(), end="")
        y = g.run_reference(values)["y"]  # numpy in, numpy out, no copies
        print(f"reference: y {list(y.shape)} sum {y.sum():.6f} y[0][:4] {np.round(y[0, :4], 6)}")
        report = g.compile("sm_90a", disable_cache=True)
        print(f"sm_90a megakernel: {report.num_tasks} tasks, {report.cubin_bytes} cubin bytes, "
              f"{report.compile_ms:.0f} ms, key {report.key}")
        if weft.device_count() > 0:
            import torch

            with weft.Program(g) as program:
                out = program.run({k: torch.from_numpy(v).cuda() for k, v in values.items()})["y"]
                program.synchronize()
            print(f"GPU: max |gpu - reference| {np.abs(out.cpu().numpy() - y).max():.2e}")
        else:
            print("GPU:", weft.cuda_unavailable_reason())

    try:
        import torch
    except ImportError:
        return
    from weft.torch import stats  # registers the "weft" backend (the installed package's entry point does too)

    model = torch.nn.Sequential(torch.nn.Linear(D_IN, D_HIDDEN), torch.nn.GELU(approximate="tanh"),
                                torch.nn.Linear(D_HIDDEN, D_OUT)).eval()
    x = torch.from_numpy(values["x"])
    with torch.no_grad():
        diff = (torch.compile(model, backend="weft")(x) - model(x)).abs().max().item()
    print(f"torch.compile(backend='weft'): max |weft - eager| {diff:.2e}; {stats}")


if __name__ == "__main__":
    main()
