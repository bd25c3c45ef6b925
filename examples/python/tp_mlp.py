#!/usr/bin/env python3
"""A tensor-parallel MLP block with ovl: column-parallel AllGather+GEMM, GELU, row-parallel GEMM+ReduceScatter
(sequence parallelism as in Megatron-LM: activations enter and leave sharded by rows).

    rank r holds  x_r: T/W x H (its rows),  W1_r: F/W x H (its columns of the up projection),
                  W2_r: H x F/W (its rows of the down projection)
    h_r  = all_gather(x) @ W1_r^T            ovl all_gather_gemm       T x F/W
    y_r  = rows r of sum_s gelu(h_s) @ W2_s^T   ovl gemm_reduce_scatter   T/W x H

Several GPUs, one process each:   torchrun --nproc_per_node=8 examples/python/tp_mlp.py
One GPU, a loopback world of 8:   python examples/python/tp_mlp.py --loopback 8

Checked against torch.matmul plus torch.distributed collectives (all_gather_into_tensor, reduce_scatter_tensor)
in float32 on several GPUs. In loopback, rank 0 runs on this script's tensors and ranks 1..W-1 are emulated with
inputs the context makes (core/include/ovl/core/context.hpp): their rows of x for the gather and their partial
products for the reduction, which Context.loopback_peer_inputs returns; the reference is rank 0's math with those.
--graph captures the block in a CUDA Graph after a warm-up call and checks the replays as well.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

import ovl


def rel_error(x, ref):
    return float((x.double() - ref.double()).norm() / ref.double().norm())


def mlp(ctx, x, w1, w2):
    h = ctx.all_gather_gemm(x, w1)      # T x F/W
    a = F.gelu(h, approximate="tanh")  # bf16, on the current stream
    return h, a, ctx.gemm_reduce_scatter(a, w2)  # T/W x H


def main():
    parser = argparse.ArgumentParser(description="tensor-parallel MLP block with ovl")
    parser.add_argument("--loopback", type=int, default=0, help="emulate this many ranks on one GPU")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--ffn", type=int, default=8192)
    parser.add_argument("--graph", action="store_true", help="also capture the block in a CUDA Graph")
    args = parser.parse_args()

    distributed = "RANK" in os.environ and args.loopback == 0
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("nccl")
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        ctx = ovl.distributed.context()
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        ctx = ovl.Context(loopback_world=args.loopback or 1)
        rank, world = 0, ctx.world_size
    T, H, FF = args.tokens, args.hidden, args.ffn
    assert T % world == 0 and FF % world == 0, "tokens and ffn must divide by the world size"

    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    x = (torch.randn(T // world, H, generator=g, device="cuda") * 0.5).to(torch.bfloat16)
    w1 = (torch.randn(FF // world, H, generator=g, device="cuda") / H**0.5).to(torch.bfloat16)
    w2 = (torch.randn(H, FF // world, generator=g, device="cuda") / FF**0.5).to(torch.bfloat16)

    h, a, y = mlp(ctx, x, w1, w2)
    torch.cuda.synchronize()

    # The reference: the same block from torch.matmul and torch.distributed collectives (float32), or in loopback
    # rank 0's math with the emulated ranks' inputs.
    if distributed:
        x_all = torch.empty(T, H, **bf16)
        dist.all_gather_into_tensor(x_all, x)
        h_ref = x_all.float() @ w1.float().T
        partial = a.float() @ w2.float().T  # from ovl's activation: each stage is checked on its own
        y_ref = torch.empty(T // world, H, device="cuda")
        dist.reduce_scatter_tensor(y_ref, partial)
    else:
        emulated = ctx.loopback  # a world of 1 has no other ranks
        rows = ctx.loopback_peer_inputs("allgather-gemm", x, w1) if emulated else []  # ranks 1..W-1's rows of x
        h_ref = torch.cat([x] + rows).double() @ w1.double().T
        total = a.double() @ w2.double().T
        for p in ctx.loopback_peer_inputs("gemm-reducescatter", a, w2) if emulated else []:  # their partials
            total += p.double()
        y_ref = total[: T // world]
    # bf16 outputs: about 2^-9 relative per element; 1e-2 on the relative Frobenius error.
    errors = {"all_gather_gemm": rel_error(h, h_ref), "gemm_reduce_scatter": rel_error(y, y_ref)}

    if args.graph:
        out = torch.empty_like(y)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _, _, y_captured = mlp(ctx, x, w1, w2)
            out.copy_(y_captured)
        for _ in range(3):
            out.zero_()
            graph.replay()
        torch.cuda.synchronize()
        errors["graph_replay"] = rel_error(out, y)

    ok = all(e < 1e-2 for e in errors.values())
    plans = {op: ctx.plan_choice(ctx.problem(op, *t)).plan.summary()
             for op, t in (("allgather-gemm", (x, w1)), ("gemm-reducescatter", (a, w2)))}
    if rank == 0:
        where = f"{world} ranks" + (" (loopback on one GPU)" if ctx.loopback else "")
        print(f"tp_mlp: T={T} H={H} F={FF}, {where}")
        for op, summary in plans.items():
            print(f"  {op:20s} plan: {summary}")
        for name, e in errors.items():
            print(f"  {name:20s} relative error {e:.2e}")
        print("OK" if ok else "FAILED")
    if distributed:
        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
