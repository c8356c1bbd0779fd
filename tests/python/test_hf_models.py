"""Real architectures, as users compile them: tiny configs of the suite's transformers models and
of families the suite does not time (LLM decoders with RMSNorm, rotary, ALiBi, sliding windows and
grouped KV heads; encoder-decoders; windowed, pooled and conv-mixing vision models; speech
encoders). Each graph's output against eager by the harness rule with an fp64 reference, in fp32
and bf16, twice; nothing left to the interpreter; oneDNN ran the dense layers. Random weights,
no downloads: models built from configs (transformers is a test dependency, Makefile DEPS)."""
import pytest
import torch
import transformers

from fxcpp.explain import Report, recording
from helpers import assert_same


def _tokens(batch=2, seq=16, vocab=256):
    return (torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(1)),)


def _image(size=32):
    return (torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1)),)


def _audio(*shape):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)


TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=256)
DECODER = dict(TEXT, num_key_value_heads=2)
VISION = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)

# name: (config class, model class, config keywords, inputs)
MODELS = {
    # the suite's families (benchmarks/suite.py), tiny
    "bert": ("BertConfig", "BertModel", TEXT, _tokens),
    "distilbert": ("DistilBertConfig", "DistilBertModel",
                   dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=256), _tokens),
    "gpt2": ("GPT2Config", "GPT2Model", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=256), _tokens),
    "t5": ("T5Config", "T5Model", dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=256),
           lambda: _tokens() + (None,) + _tokens(seq=8)),
    "vit": ("ViTConfig", "ViTModel", dict(VISION, image_size=32, patch_size=8), _image),
    "resnet": ("ResNetConfig", "ResNetModel", dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1]), _image),
    "mobilenetv2": ("MobileNetV2Config", "MobileNetV2Model", dict(image_size=32, depth_multiplier=0.35), _image),
    "convnext": ("ConvNextConfig", "ConvNextModel", dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2), _image),
    "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", dict(VISION, conv_dim=(32, 32), conv_stride=(5, 2),
                 conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
                 lambda: _audio(2, 800)),
    # decoders: RMSNorm, rotary, grouped KV heads, SiLU/GELU gates, ALiBi, parallel attention
    "llama": ("LlamaConfig", "LlamaModel", DECODER, _tokens),
    "qwen2": ("Qwen2Config", "Qwen2Model", DECODER, _tokens),
    "mistral": ("MistralConfig", "MistralModel", dict(DECODER, sliding_window=8), _tokens),
    "gemma": ("GemmaConfig", "GemmaModel", dict(DECODER, head_dim=16), _tokens),
    "phi": ("PhiConfig", "PhiModel", DECODER, _tokens),
    "opt": ("OPTConfig", "OPTModel", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
            word_embed_proj_dim=64, vocab_size=256), _tokens),
    "bloom": ("BloomConfig", "BloomModel", dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=256), _tokens),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXModel", TEXT, _tokens),
    "falcon": ("FalconConfig", "FalconModel", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               vocab_size=256), _tokens),
    # encoders and encoder-decoders beyond BERT: shared layers, relative positions, span convs, pooling
    "albert": ("AlbertConfig", "AlbertModel", dict(TEXT, embedding_size=32), _tokens),
    "deberta_v2": ("DebertaV2Config", "DebertaV2Model", TEXT, _tokens),
    "convbert": ("ConvBertConfig", "ConvBertModel", TEXT, _tokens),
    "funnel": ("FunnelConfig", "FunnelBaseModel", dict(d_model=64, n_head=4, d_head=16, d_inner=128,
               block_sizes=[1, 1, 1], vocab_size=256), _tokens),
    "bart": ("BartConfig", "BartModel", dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=256), _tokens),
    "whisper": ("WhisperConfig", "WhisperForAudioClassification", dict(d_model=64, encoder_layers=2,
                encoder_attention_heads=4, encoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32),
                lambda: _audio(2, 16, 64)),
    # vision beyond ViT and ResNet: windows with shifts, efficient attention, separable and
    # squeeze-excite convs, pooling mixers, attention with batch norms
    "clip_vision": ("CLIPVisionConfig", "CLIPVisionModel", dict(VISION, image_size=32, patch_size=8), _image),
    "swin": ("SwinConfig", "SwinModel", dict(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2],
             num_heads=[2, 4], window_size=4), _image),
    "segformer": ("SegformerConfig", "SegformerModel", dict(hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1],
                  decoder_hidden_size=32), _image),
    "mobilevit": ("MobileViTConfig", "MobileViTModel", dict(image_size=32, hidden_sizes=[32, 48, 64],
                  neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 80]), _image),
    "efficientnet": ("EfficientNetConfig", "EfficientNetModel", dict(image_size=32, hidden_dim=320,
                     width_coefficient=0.25, depth_coefficient=0.25), _image),
    "regnet": ("RegNetConfig", "RegNetModel", dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
               groups_width=8), _image),
    "poolformer": ("PoolFormerConfig", "PoolFormerModel", dict(hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1]),
                   _image),
    "levit": ("LevitConfig", "LevitModel", dict(image_size=32, hidden_sizes=[32, 48, 64], num_attention_heads=[2, 2, 2],
              depths=[1, 1, 1], key_dim=[8, 8, 8]), _image),
}


def _cast(xs, dtype):
    """The floating inputs in dtype; token ids and None as they are."""
    return [x.to(dtype) if x is not None and x.is_floating_point() else x for x in xs]


def _leaves(out):
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _model_and_fp64_twin(name, dtype):
    """MODELS[name]'s config, the model in eval mode and dtype (seeded), and its fp64 twin with
    the same weights (the harness rule's reference)."""
    config, model_class, config_kw, _ = MODELS[name]
    cfg = getattr(transformers, config)(**config_kw)
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(cfg).eval().to(dtype)
    model64 = getattr(transformers, model_class)(cfg).eval()
    model64.load_state_dict(model.state_dict())
    return cfg, model, model64.double()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_eager(name, dtype):
    cfg, model, model64 = _model_and_fp64_twin(name, dtype)
    xs = MODELS[name][3]()
    # An encoder-decoder's cache is built through a deepcopy of its config (a graph break):
    # one forward has no use for it (benchmarks/suite.py calls T5 so too).
    kw = {"return_dict": False, **({"use_cache": False} if cfg.is_encoder_decoder else {})}
    graphs = []
    with torch.no_grad():
        lowp = _cast(xs, dtype)
        ref = _leaves(model(*lowp, **kw))
        ref64 = _leaves(model64(*_cast(xs, torch.float64), **kw))
        compiled = torch.compile(model, backend="fxcpp")
        with recording(graphs):
            first = _leaves(compiled(*lowp, **kw))
        second = _leaves(compiled(*lowp, **kw))
    assert ref and all(r.dtype == f.dtype and r.shape == f.shape for r, f in zip(ref, first)), name
    assert_same(ref, first, fp64_ref=ref64)
    assert_same(ref, second, fp64_ref=ref64)
    report = Report(graphs)
    assert graphs and report.fallbacks == [], report.fallbacks
    assert report.kernel_counts["onednn"] > 0, report.kernel_counts


def _without_dropout(cfg):
    for key, value in vars(cfg).items():
        if isinstance(value, float) and ("dropout" in key or key.endswith(("_pdrop", "drop_rate", "drop_path_rate"))):
            setattr(cfg, key, 0.0)
    return cfg


@pytest.mark.parametrize("name", ["llama", "vit", "t5"])
def test_a_training_step_matches_eager(name):
    """A forward and backward in train mode (dropout off): the loss and every parameter's
    gradient against eager by the harness rule with an fp64 reference."""
    config, model_class, config_kw, inputs = MODELS[name]
    cfg = _without_dropout(getattr(transformers, config)(**config_kw))
    torch.manual_seed(0)
    models = [getattr(transformers, model_class)(cfg).train() for _ in range(3)]
    for m in models[1:]:
        m.load_state_dict(models[0].state_dict())
    models[2].double()
    xs = inputs()

    def step(model, cast=None):
        out = _leaves(model(*(_cast(xs, cast) if cast else xs), return_dict=False))
        loss = sum(o.pow(2).mean() for o in out if o.is_floating_point())
        loss.backward()
        return [loss.detach()] + [p.grad for p in getattr(model, "_orig_mod", model).parameters()]

    ref, ref64 = step(models[0]), step(models[2], torch.float64)
    res = step(torch.compile(models[1], backend="fxcpp"))
    assert all(g is not None for g in res) and len(res) == len(ref), name
    assert_same(ref, res, fp64_ref=ref64)


@pytest.mark.parametrize("name", ["segformer", "wav2vec2"])
def test_dynamic_shapes_keep_size_arithmetic_in_the_core(name):
    """dynamic=True: families whose graphs compute sizes (window padding, strided lengths) with
    pow, sym_sum and friends, at batch 2 and 3 (Dynamo specializes 1), against eager with an
    fp64 reference; one graph, nothing in the Interpreter."""
    _, model, model64 = _model_and_fp64_twin(name, torch.float32)
    inputs = MODELS[name][3]
    compiled = torch.compile(model, backend="fxcpp", dynamic=True)
    graphs = []
    with torch.no_grad(), recording(graphs):
        for xs in (inputs(), [torch.cat([x, x[:1]]) for x in inputs()]):
            ref = _leaves(model(*xs, return_dict=False))
            ref64 = _leaves(model64(*_cast(xs, torch.float64), return_dict=False))
            assert_same(ref, _leaves(compiled(*xs, return_dict=False)), fp64_ref=ref64)
    report = Report(graphs)
    assert len(graphs) == 1 and report.fallbacks == [], report.fallbacks
    assert report.kernel_counts["interpreter"] == 0, report.kernel_counts
