"""The runtimes a serving team would pick instead of a torch.compile backend, as harness
configurations: ONNX Runtime and OpenVINO (both CPU, from PyPI, pinned in the Makefile).

Each compiles at its first call, as torch.compile does, so the harness times export,
conversion and session creation as the compile. Each takes the model (a CallModule) rather
than a function: exporters need an nn.Module and its parameters. The output is rebuilt into
eager's structure and dtypes (one eager call at compile time gives them), so the harness
compares it like any other. A model a peer cannot export, convert or run raises here, and the
harness records the case as failed for that peer.
"""
from __future__ import annotations

import os
import tempfile
import warnings

import torch
import torch.nn as nn
from torch.utils import _pytree as pytree


def _floating_dtype(module: nn.Module) -> torch.dtype:
    return next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)


class _Peer:
    """Lazy: the first call builds the runtime's model from that call's inputs."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.run = None
        self.spec = self.dtypes = None

    def __call__(self, *inputs):
        if self.run is None:
            with torch.no_grad():
                leaves, self.spec = pytree.tree_flatten(self.module(*inputs))
            self.dtypes = [t.dtype for t in leaves]
            self.run = self.build(inputs)
        # An input that is None (T5's attention mask) is not an input of the exported model.
        outs = self.run([x.detach().numpy() if x.dtype != torch.bfloat16 else x.detach().float().numpy()
                         for x in inputs if x is not None])
        if len(outs) != len(self.dtypes):
            raise RuntimeError(f"{type(self).__name__}: {len(outs)} outputs, eager gives {len(self.dtypes)}")
        leaves = [torch.from_numpy(o.copy()).to(d) for o, d in zip(outs, self.dtypes)]
        return pytree.tree_unflatten(leaves, self.spec)

    def build(self, inputs):
        raise NotImplementedError


class OnnxRuntime(_Peer):
    """torch.onnx.export with the dynamo exporter, then a CPU InferenceSession: intra-op
    threads = torch's, one inter-op thread, no spinning (spinning threads would steal the
    cores from the other configurations the harness interleaves with)."""

    def build(self, inputs):
        import onnxruntime as ort

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.onnx")
            torch.onnx.export(self.module, tuple(inputs), path, dynamo=True, external_data=True)
            so = ort.SessionOptions()
            so.intra_op_num_threads = torch.get_num_threads()
            so.inter_op_num_threads = 1
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            so.add_session_config_entry("session.inter_op.allow_spinning", "0")
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        given = sum(x is not None for x in inputs)
        if len(names) != given:
            raise RuntimeError(f"onnxruntime: the exported model takes {len(names)} inputs, the case gives {given}")
        return lambda arrays: sess.run(None, dict(zip(names, arrays)))


def _ov_config(module: nn.Module) -> dict:
    precision = {torch.bfloat16: "bf16", torch.float16: "f16"}.get(_floating_dtype(module), "f32")
    return {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": str(torch.get_num_threads()),
            "PERFORMANCE_HINT": "LATENCY"}


class OpenVino(_Peer):
    """openvino.convert_model from the module, compile_model on CPU with the inference
    precision pinned to the case's dtype (OpenVINO would otherwise run fp32 models in bf16 on
    a host with native bf16) and torch's thread count."""

    def build(self, inputs):
        import openvino as ov

        ov_model = ov.convert_model(self.module, example_input=tuple(inputs))
        # numpy has no bf16: such a model takes and gives f32 at its edges (the converts run
        # inside OpenVINO); the harness casts the outputs back to eager's dtypes.
        ppp = ov.preprocess.PrePostProcessor(ov_model)
        for i, x in enumerate(inputs):
            if x.dtype == torch.bfloat16:
                ppp.input(i).tensor().set_element_type(ov.Type.f32)
        for i, d in enumerate(self.dtypes):
            if d == torch.bfloat16:
                ppp.output(i).tensor().set_element_type(ov.Type.f32)
        ov_model = ppp.build()
        compiled = ov.Core().compile_model(ov_model, "CPU", _ov_config(self.module))
        request = compiled.create_infer_request()

        def run(arrays):
            res = request.infer(arrays, share_inputs=True)  # no input copy, as a service would call it
            return [res[o] for o in compiled.outputs]

        return run


def _import_openvino_torch():
    """`import openvino.torch` registers backend="openvino" and sets Dynamo's
    inline_inbuilt_nn_modules to False for the whole process. On torch 2.11 (2.12 not checked) Dynamo then
    treats module parameters as constants in every later compile, fxcpp's and Inductor's
    included (a replaced parameter goes unseen; fxcpp's direct call path and freeze=True turn
    off): the harness would time them in a mode no user of theirs chose. The process keeps its
    own value; OpenVINO's backend runs in Dynamo's default, as it does on torch 2.13, where
    the setting does nothing."""
    with warnings.catch_warnings():  # torch 2.13 deprecates the setting
        warnings.simplefilter("ignore", FutureWarning)
        before = torch._dynamo.config.inline_inbuilt_nn_modules
        try:
            import openvino.torch  # noqa: F401
        finally:
            torch._dynamo.config.inline_inbuilt_nn_modules = before


def openvino_torch_compile(module: nn.Module):
    """OpenVINO's own torch.compile backend, with the same precision and threads."""
    _import_openvino_torch()
    return torch.compile(module, backend="openvino", options={"device": "CPU", "config": _ov_config(module)})
