"""ovl worlds from torch.distributed (imports torch when used).

One process per GPU, as torchrun starts them::

    torch.distributed.init_process_group("nccl")
    torch.cuda.set_device(local_rank)
    ctx = ovl.distributed.context()          # an ovl.Context on this rank's World
    y = ctx.gemm_reduce_scatter(x, w)        # every rank calls it, in the same order

Rank 0 makes an NCCL unique id, the group broadcasts it (broadcast_object_list), and every rank makes its own NCCL
communicator with it (ncclCommInitRank): ovl's communicators are its own, beside torch's.
"""

from __future__ import annotations

from typing import Optional, Sequence

from . import _ovl

__all__ = ["world", "context"]


def world(group=None, device: Optional[int] = None, nccl_cta_bounds: Sequence[int] = (0,)) -> "_ovl.World":
    """This rank's ovl.World over the ranks of ``group`` (default: the whole world). ``device``: this rank's GPU
    (default: torch.cuda.current_device()). ``nccl_cta_bounds`` as WorldOptions (0: NCCL's own CTA count).
    Collective: every rank of the group calls it."""
    import torch
    import torch.distributed as dist

    if not _ovl.cuda:
        raise _ovl.Error("ovl.distributed needs the CUDA build of ovl")
    if not dist.is_initialized():
        raise _ovl.Error("ovl.distributed.world: torch.distributed is not initialized (init_process_group first)")
    rank = dist.get_rank(group)
    size = dist.get_world_size(group)
    if device is None:
        device = torch.cuda.current_device()
    ids = [_ovl.World.new_nccl_id() if rank == 0 else None]
    # broadcast_object_list's src is a global rank: group rank 0's.
    src = dist.get_global_rank(group, 0) if group is not None else 0
    dist.broadcast_object_list(ids, src=src, group=group)
    return _ovl.World.from_nccl_id(ids[0], rank, size, int(device), list(nccl_cta_bounds))


def context(group=None, device: Optional[int] = None, **options):
    """An ovl.Context on ``world(group, device)``; ``options`` as ovl.Context (hardware, trace, ...)."""
    from .context import Context

    w = world(group, device)
    return Context(world=w, **options)
