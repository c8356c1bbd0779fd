"""A model compiled with fxcpp inside DistributedDataParallel: 2 CPU processes, gloo, several
SGD steps; the losses and the final weights equal eager DDP's within the harness tolerance
(issue 14). Dynamo's DDPOptimizer splits the graph at DDP's bucket boundaries; fxcpp compiles
each piece's forward and backward."""
import os
import socket
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

STEPS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 512), nn.GELU(), nn.LayerNorm(512), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 4))  # 2 MB of weights: several 1 MB buckets


def _train(rank: int, compiled: bool):
    from torch.nn.parallel import DistributedDataParallel as DDP

    # DDP around the compiled module: Dynamo's DDPOptimizer sees DDP active and splits the graph
    # at its bucket boundaries. (torch.compile(DDP(model)) compiles no graph on torch 2.13, with
    # backend="eager" too: Dynamo does not trace into DDP's forward.)
    inner = _model()
    model = DDP(torch.compile(inner, backend="fxcpp") if compiled else inner, bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    losses = []
    for _ in range(STEPS):
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), [p.detach().clone() for p in model.parameters()]


def _worker(rank: int, world: int, port: int, out: str):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        import fxcpp  # noqa: F401
        from fxcpp.explain import recording

        eager_losses, eager_params = _train(rank, compiled=False)
        graphs: list = []
        with recording(graphs):
            losses, params = _train(rank, compiled=True)
        kinds = sorted({g.kind for g in graphs})
        torch.save({"eager": (eager_losses, eager_params), "fxcpp": (losses, params), "kinds": kinds,
                    "graphs": len(graphs),
                    "fallbacks": [f for g in graphs for f in g.fallbacks]}, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch.distributed with gloo")
def test_ddp_with_fxcpp_trains_like_eager_ddp():
    from helpers import assert_same

    with tempfile.TemporaryDirectory() as out:
        ctx = mp.start_processes(_worker, args=(2, _free_port(), out), nprocs=2, join=False, start_method="spawn")
        while not ctx.join(timeout=300):
            pass
        results = [torch.load(f"{out}/rank{r}.pt") for r in range(2)]
    for r in results:
        (el, ep), (fl, fp) = r["eager"], r["fxcpp"]
        assert_same(el, fl)
        for a, b in zip(ep, fp):
            assert_same(a, b)
        assert "forward" in r["kinds"] and "backward" in r["kinds"], r["kinds"]
        assert r["graphs"] >= 4, r["graphs"]  # DDPOptimizer split the model into several pieces
        assert not r["fallbacks"], r["fallbacks"]  # each piece ran in fxcpp's C++ core
    # DDP kept the replicas equal: both ranks end with the same weights
    for a, b in zip(results[0]["fxcpp"][1], results[1]["fxcpp"][1]):
        assert torch.equal(a, b)
    assert not torch.equal(results[0]["fxcpp"][0], results[1]["fxcpp"][0])  # on different data
