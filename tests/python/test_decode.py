"""Decoding (issue 12): a Hugging Face generate() loop, greedy with the KV cache, with the
model's forward compiled by fxcpp gives eager's tokens and compiles a bounded number of graphs
however long the sequence grows. benchmarks/decode.py times the same loop at full size."""
import pytest
import torch
import transformers  # a test dependency (Makefile DEPS)

import fxcpp


def _gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=128)
    return cfg, transformers.GPT2LMHeadModel


def _llama():
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=500, max_position_embeddings=128)
    return cfg, transformers.LlamaForCausalLM


@pytest.mark.parametrize("build", [_gpt2, _llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_generate_matches_eager_with_bounded_graphs(build, dtype):
    torch.manual_seed(0)
    cfg, cls = build()
    cfg.pad_token_id = cfg.eos_token_id = None  # random weights: never stop early
    model = cls(cfg).eval().to(dtype)
    ids = torch.randint(0, cfg.vocab_size, (1, 5), generator=torch.Generator().manual_seed(1))
    graphs = []

    def counting(gm, example_inputs, **kw):
        graphs.append(gm)
        return fxcpp.backend(gm, example_inputs, **kw)

    def generate(m, n):
        return m.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)

    with torch.no_grad():
        ref = generate(model, 64)
        eager_forward = model.forward
        model.forward = torch.compile(eager_forward, backend=counting)
        out = generate(model, 64)
        again = generate(model, 64)
    assert torch.equal(out, ref), (out, ref)
    assert torch.equal(again, ref)
    assert 1 <= len(graphs) <= 4, f"{len(graphs)} graphs for 64 new tokens"
