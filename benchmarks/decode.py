"""Decoding: a Hugging Face generate() loop (greedy, KV cache) with the model's forward
compiled, against eager. Per model and dtype: whether the tokens equal eager's, how many
graphs each backend compiled for 64 new tokens (and whether more appear on later calls),
and the time per generated token, interleaved rounds in one process.

    python -m benchmarks.decode [--models gpt2 llama] [--dtypes fp32 bf16] [--backends eager inductor fxcpp]

`fxcpp_flash` is fxcpp with ATen's flash attention kept (FXCPP_ATTENTION=native).

Models are built from transformers configs with random weights (no download), as the suite does.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
from pathlib import Path

import torch

from .harness import DTYPES
from .machine import command_line, machine_info, physical_cores, save_results

REPO = Path(__file__).resolve().parent.parent


def build(name: str):
    import transformers as tf

    torch.manual_seed(0)
    if name == "gpt2":  # GPT-2 small's shape (124M parameters)
        cfg = tf.GPT2Config()
        model = tf.GPT2LMHeadModel(cfg)
    elif name == "llama":  # a 4-layer LLaMA (hidden 512), as in issue 10
        cfg = tf.LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                             num_key_value_heads=8, vocab_size=32000, max_position_embeddings=512)
        model = tf.LlamaForCausalLM(cfg)
    else:
        raise SystemExit(f"unknown model {name!r}; known: gpt2, llama")
    cfg.pad_token_id = cfg.eos_token_id = None  # random weights: never stop early
    return model.eval()


def _counting(backend: str, count: list):
    """The backend, counting the graphs Dynamo hands it."""
    if backend == "inductor":
        from torch._inductor.compile_fx import compile_fx as real
    else:
        import fxcpp

        real = fxcpp.backend

    def compile_graph(gm, example_inputs, **kw):
        count.append(1)
        if backend != "fxcpp_flash":
            return real(gm, example_inputs, **kw)
        # fxcpp with ATen's flash attention kept (FXCPP_ATTENTION=native, read as kernels are made)
        old = os.environ.get("FXCPP_ATTENTION")
        os.environ["FXCPP_ATTENTION"] = "native"
        try:
            return real(gm, example_inputs, **kw)
        finally:
            os.environ.pop("FXCPP_ATTENTION") if old is None else os.environ.update(FXCPP_ATTENTION=old)

    return compile_graph


def generate(model, ids, new_tokens: int):
    return model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)


def first_difference(base, ref, out, prompt: int) -> dict:
    """Where a backend's tokens first leave eager's, and how close eager's choice was there: the
    gap between eager's two best logits at that step, against the spread of its logits."""
    n = min(ref.shape[1], out.shape[1])
    diff = (ref[0, :n] != out[0, :n]).nonzero()
    if not len(diff):
        return {"first_diff_token": n - prompt}
    pos = int(diff[0])
    logits = base(ref[:, :pos]).logits[0, -1].float()
    top = logits.topk(2).values
    return {"first_diff_token": pos - prompt, "eager_top2_gap": float(top[0] - top[1]),
            "eager_logit_std": float(logits.std())}


def run_case(name: str, dtype: str, backends: list, new_tokens: int, prompt: int, rounds: int) -> dict:
    torch._dynamo.reset()
    base = build(name).to(DTYPES[dtype])
    ids = torch.randint(0, base.config.vocab_size, (1, prompt), generator=torch.Generator().manual_seed(1))
    rec: dict = {"model": name, "dtype": dtype, "prompt_tokens": prompt, "new_tokens": new_tokens, "backends": {}}
    models, counts = {}, {}
    with torch.no_grad():
        ref = generate(base, ids, new_tokens)
        for b in backends:
            m = base if b == "eager" else copy.deepcopy(base)
            r = rec["backends"][b] = {}
            if b != "eager":
                counts[b] = []
                m.forward = torch.compile(m.forward, backend=_counting(b, counts[b]))
            t0 = time.perf_counter()
            try:
                out = generate(m, ids, new_tokens)
            except Exception as e:  # noqa: BLE001 - a backend that fails is recorded, never fatal
                r["error"] = f"{type(e).__name__}: {e}"[:500]
                continue
            r["first_generate_s"] = time.perf_counter() - t0
            r["same_tokens"] = bool(torch.equal(out, ref))
            if not r["same_tokens"]:
                r.update(first_difference(base, ref, out, prompt))
            if b != "eager":
                r["graphs_first_generate"] = len(counts[b])
            models[b] = m
        samples = {b: [] for b in models}
        for _ in range(rounds):  # interleaved: every backend once per round
            for b, m in models.items():
                t0 = time.perf_counter()
                out = generate(m, ids, new_tokens)
                samples[b].append((time.perf_counter() - t0) / new_tokens)
                rec["backends"][b]["same_tokens"] &= bool(torch.equal(out, ref))
    for b, s in samples.items():
        r = rec["backends"][b]
        r["ms_per_token"] = statistics.median(s) * 1e3
        r["ms_per_token_samples"] = [x * 1e3 for x in s]
        if b in counts:
            r["graphs_total"] = len(counts[b])
    eager = rec["backends"].get("eager", {}).get("ms_per_token")
    for b, r in rec["backends"].items():
        if eager and "ms_per_token" in r:
            r["speedup_vs_eager"] = eager / r["ms_per_token"]
    return rec


def to_markdown(res: dict) -> str:
    m = res["machine"]
    host = (m.get("host") or {}).get("summary", "?")
    lines = ["# Decoding: generate() with a compiled forward", "",
             f"Host ISA: {host}. {m['cpu_model']}, {m['threads']} threads, torch {m['torch_version']}, "
             f"commit {(m['git_commit'] or '?')[:10]}{' (dirty)' if m['git_dirty'] else ''}. `{m['command']}`", "",
             "Greedy decoding with the KV cache, prompt of %d tokens, %d new tokens; time per token is the median "
             "over %d interleaved rounds of a whole generate() call divided by the new tokens (prefill included). "
             "Graphs: how many Dynamo handed the backend in the first generate() and in all of them." % (
                 res["prompt_tokens"], res["new_tokens"], res["rounds"]), "",
             "| model | dtype | backend | same tokens | graphs (first / all) | ms per token | vs eager | first generate() s |",
             "|---|---|---|---|---|---|---|---|"]
    for c in res["cases"]:
        for b, r in c["backends"].items():
            if "error" in r:
                lines.append(f"| {c['model']} | {c['dtype']} | {b} | error: {r['error'][:80]} | | | | |")
                continue
            graphs = "-" if b == "eager" else f"{r.get('graphs_first_generate')} / {r.get('graphs_total')}"
            same = str(r["same_tokens"])
            if "first_diff_token" in r:
                same += f" (token {r['first_diff_token']} of {res['new_tokens']} differs"
                same += (f"; eager's top-2 logit gap there {r['eager_top2_gap']:.3g}, logit std "
                         f"{r['eager_logit_std']:.3g})" if "eager_top2_gap" in r else ")")
            lines.append(f"| {c['model']} | {c['dtype']} | {b} | {same} | {graphs} | "
                         f"{r.get('ms_per_token', float('nan')):.2f} | {r.get('speedup_vs_eager', float('nan')):.2f}x | "
                         f"{r['first_generate_s']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["gpt2", "llama"])
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=sorted(DTYPES))
    ap.add_argument("--backends", nargs="+", default=["eager", "inductor", "fxcpp"])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=physical_cores())
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "decode"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch._dynamo.config.recompile_limit = 64  # several backends compile one forward in this process
    backends = ["eager"] + [b for b in args.backends if b != "eager"]
    cmd = command_line("benchmarks.decode", argv)
    res = {"machine": machine_info(args.threads, cmd), "prompt_tokens": args.prompt, "new_tokens": args.new_tokens,
           "rounds": args.rounds, "cases": []}
    for name in args.models:
        for dt in args.dtypes:
            c = run_case(name, dt, backends, args.new_tokens, args.prompt, args.rounds)
            print(json.dumps(c))
            res["cases"].append(c)
    save_results(args.out, "decode", res, to_markdown(res))
    return res


if __name__ == "__main__":
    main()
