"""Complex tensors inside a graph: the C++ core runs their ATen ops (no fused kernel takes
them) with the traced dtypes, and a complex -> real op such as abs is typed as eager types it."""
import warnings

import torch

from fxcpp.explain import Report, recording
from helpers import assert_same, compile_fxcpp


class LogMel(torch.nn.Module):
    """An audio front end written as Whisper's feature extractor is: |STFT|^2, a mel
    projection, log10, a dynamic-range clamp."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("window", torch.hann_window(400))
        self.register_buffer("filters", torch.rand(201, 80))

    def forward(self, audio):
        stft = torch.stft(audio, 400, 160, window=self.window, return_complex=True)
        power = stft[..., :-1].abs() ** 2
        mel = self.filters.T @ power
        log = torch.clamp(mel, min=1e-10).log10()
        log = torch.maximum(log, log.max() - 8.0)
        return (log + 4.0) / 4.0


def _compiled_without_fallback(fn, *inputs):
    graphs = []
    with warnings.catch_warnings(record=True) as caught, recording(graphs), torch.no_grad():
        warnings.simplefilter("always")
        out = compile_fxcpp(fn)(*inputs)
    said = [str(w.message) for w in caught if str(w.message).startswith("fxcpp:")]
    assert not said, said
    report = Report(graphs)
    assert graphs and report.kernel_counts["interpreter"] == 0, report.kernel_counts
    return out, report


def test_complex_abs_is_real_and_runs_in_the_core():
    def f(z, w):
        return z.abs() * w + torch.view_as_real(z * 2).sum(-1)

    z = torch.randn(6, 10, dtype=torch.complex64)
    w = torch.randn(6, 10)
    out, _ = _compiled_without_fallback(f, z, w)
    assert out.dtype == torch.float32
    assert_same(out, f(z, w))


def test_a_spectrogram_front_end_matches_eager():
    model = LogMel().eval()
    audio = torch.randn(2, 8000)
    out, report = _compiled_without_fallback(model, audio)
    assert report.kernel_counts["onednn"] + report.kernel_counts["aten"] > 0
    assert_same(out, model(audio))
