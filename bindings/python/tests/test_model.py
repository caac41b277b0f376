"""weft.Model: a tiny Hugging Face Llama folder written by transformers, generated on the CPU reference and
checked against the transformers model itself."""
import numpy as np
import pytest
import torch

import weft

transformers = pytest.importorskip("transformers")

VOCAB = 128


@pytest.fixture(scope="module")
def hf_model(tmp_path_factory):
    """(transformers model, folder it was saved to): float32 so both sides agree closely."""
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=VOCAB,
                                   max_position_embeddings=64, bos_token_id=None, eos_token_id=None,
                                   pad_token_id=0)
    torch.manual_seed(11)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    folder = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(folder)
    return model, folder


@pytest.fixture
def model(hf_model):
    with weft.Model(hf_model[1], backend="reference", max_batch=4, max_seq=32) as m:
        yield m


def test_info(model):
    info = model.info()
    assert (info.model_type, info.layers, info.hidden, info.q_heads, info.kv_heads, info.head_dim, info.ffn,
            info.vocab) == ("llama", 2, 64, 4, 2, 16, 128, VOCAB)
    assert (info.max_batch, info.max_seq, info.backend) == (4, 32, "reference")
    assert info.weight_bytes > 0 and info.device


def test_generate_matches_transformers(model, hf_model):
    prompts = np.array([[1, 2, 3, 4], [9, 8, 7, 6], [100, 5, 17, 64]])
    steps = 6
    gen = model.generate(prompts, steps, return_logits=True)
    assert gen.tokens.shape == (3, steps) and gen.logits.shape == (steps, 3, VOCAB)
    assert gen.step_ms.shape == (steps,) and gen.decode_ms > 0
    np.testing.assert_array_equal(gen.tokens, gen.logits.argmax(-1).T)  # greedy: each token is its argmax
    # transformers over the prompt and weft's own tokens predicts the same logits at every step.
    ids = torch.from_numpy(np.concatenate([prompts, gen.tokens[:, :-1]], 1)).long()
    with torch.no_grad():
        hf = hf_model[0](ids).logits[:, prompts.shape[1] - 1:, :].permute(1, 0, 2)
    assert hf.abs().max() > 0.1
    np.testing.assert_allclose(gen.logits, hf.numpy(), atol=1e-4, rtol=1e-4)


def test_forced_ids_teacher_forcing(model):
    prompts = [[3, 1, 4, 1]]
    forced = [[10, 20, 30, 0]]
    gen = model.generate(prompts, 4, forced_ids=forced, return_logits=True)
    free = model.generate([[3, 1, 4, 1, 10, 20, 30]], 1, return_logits=True)
    # The last forced step saw prompt + 10, 20, 30: the same context as a free run over the longer prompt.
    np.testing.assert_allclose(gen.logits[3], free.logits[0], atol=1e-5)


@pytest.mark.parametrize("multi_step", [False, True])
def test_on_step_streams_and_stops(model, multi_step):
    prompts = [[3, 1, 4, 1], [2, 7, 1, 8]]
    full = model.generate(prompts, 5)
    assert full.steps_done == 5
    seen = []
    gen = model.generate(prompts, 5, multi_step=multi_step, on_step=lambda j, t: seen.append((j, t.tolist())))
    np.testing.assert_array_equal(gen.tokens, full.tokens)
    assert seen == [(j, full.tokens[:, j].tolist()) for j in range(5)]
    cut = model.generate(prompts, 5, multi_step=multi_step, on_step=lambda j, t: j < 1)
    assert cut.steps_done == 2
    np.testing.assert_array_equal(cut.tokens[:, :2], full.tokens[:, :2])
    assert (cut.tokens[:, 2:] == -1).all()

    def boom(j, t):
        raise KeyError("from the callback")
    with pytest.raises(KeyError, match="from the callback"):
        model.generate(prompts, 5, multi_step=multi_step, on_step=boom)
    np.testing.assert_array_equal(model.generate(prompts, 5).tokens, full.tokens)


def test_compile_for_a_batch(model):
    r = model.compile(2)
    assert r.num_tasks > 0 and r.cubin_bytes > 0 and len(r.key) == 32


def test_errors(model, tmp_path):
    with pytest.raises(weft.InvalidArgumentError) as e:
        model.generate([[1, 2]] * 5, 2)  # max_batch is 4
    assert "batch" in e.value.message
    with pytest.raises(weft.InvalidArgumentError) as e:
        model.generate([[1, VOCAB + 5]], 2)
    assert str(VOCAB + 5) in e.value.message
    with pytest.raises(weft.InvalidArgumentError, match="rows of one length"):
        model.generate([[1, 2], [3]], 2)
    with pytest.raises(weft.InvalidArgumentError) as e:
        model.compile(0)
    with pytest.raises(weft.WeftError) as e:
        weft.Model(tmp_path / "missing", backend="reference")
    assert "config.json" in e.value.message and e.value.status in (weft.Status.IO, weft.Status.INVALID_ARGUMENT)
    with pytest.raises(weft.InvalidArgumentError, match="backend is 'tpu'"):
        weft.Model(tmp_path, backend="tpu")
