"""torch.ops.dfsel.select: a torch.library custom op over Plan.run, with a fake (meta)
implementation, so that torch.compile traces through it without a graph break and CUDA graphs
capture it. The plan is named by its integer handle (Plan.handle); the op allocates its
outputs with torch, so they come from the graph's memory pool when captured.

  cand_ids, unary, scores, q, path, n_emitted = torch.ops.dfsel.select(
      logits, hidden, anchors, plan.handle, temperature, p_min, seed)

q is zeros for a greedy walk (temperature <= 0).
"""
from typing import Tuple

import torch

from ._abi import Error, Status
from ._outputs import Outputs
from ._plan import registry

Tensor = torch.Tensor


def _plan(handle):
    p = registry.get(handle)
    if p is None:
        raise Error(Status.INVALID_ARGUMENT, "plan = %d is not the handle of a live dfsel.Plan" % handle)
    return p


def _empty(plan, like, n_blocks):
    d, K = n_blocks * plan.n_drafted, plan.top_k
    i32, f32 = torch.int32, torch.float32
    return (like.new_empty((d, K), dtype=i32), like.new_empty((d, K), dtype=f32),
            like.new_empty((d, K, K), dtype=f32), like.new_empty((d, K), dtype=f32),
            like.new_empty((n_blocks, plan.n_drafted), dtype=i32), like.new_empty((n_blocks,), dtype=i32))


@torch.library.custom_op("dfsel::select", mutates_args=())
def select(logits: Tensor, hidden: Tensor, anchors: Tensor, plan: int, temperature: float,
           p_min: float, seed: int) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    p = _plan(plan)
    cand_ids, unary, scores, q, path, n_emitted = _empty(p, logits, anchors.shape[0])
    if temperature <= 0:
        q.zero_()
    arrays = dict(cand_ids=cand_ids, unary=unary, scores=scores, q=q, path=path, n_emitted=n_emitted)
    out = Outputs(anchors.shape[0], p._dims, p._device, "torch", (), arrays, trusted=True)
    # The schema's int is int64: a negative seed stands for the uint64 of the same bits.
    p.run(logits, hidden, anchors, temperature=temperature, p_min=p_min, seed=seed & 0xFFFFFFFFFFFFFFFF, out=out)
    return cand_ids, unary, scores, q, path, n_emitted


@select.register_fake
def _select_fake(logits, hidden, anchors, plan, temperature, p_min, seed):
    return _empty(_plan(plan), logits, anchors.shape[0])
