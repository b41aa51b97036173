"""torch.ops.dfsel.select and torch.ops.dfsel.select_out: one selector step as torch operators
with fake (meta) implementations, so that torch.compile traces through them without a graph
break and CUDA graphs capture them.

  cand_ids, unary, scores, q, path, n_emitted = torch.ops.dfsel.select(
      logits, hidden, anchors, plan.workspace, plan.handle, temperature, p_min, seed)
  torch.ops.dfsel.select_out(logits, hidden, anchors, plan.workspace, plan.handle, temperature,
                             p_min, seed, cand_ids, unary, scores, q, path, n_emitted)

The schemas say what a call writes. Every run writes the plan's workspace, so both operators
take it (plan.workspace, owned by plans made of torch tensors) as a mutable argument: torch
then orders the steps of one plan and never drops a step whose results go unused. select
returns six new tensors allocated through torch (from the graph's pool when captured), q zeros
for a greedy walk (temperature <= 0); select_out writes the six tensors it is given, as
plan.run(out=) does (q only when sampling), and allocates nothing. The plan is named by its
integer handle (plan.handle). Runs are enqueued on torch's current stream.

The operators are defined with torch.library.Library and implemented for the CPU and CUDA
dispatch keys directly rather than through torch.library.custom_op, whose per-call Python
layers (an autograd wrapper, device routing, a check that outputs alias no input) cost more
host time than the step itself. They have no autograd formula: the selection is not
differentiable.
"""
import ctypes

import torch

from . import _abi
from ._abi import Error, Status
from ._plan import registry

_U64 = (1 << 64) - 1
_NAMES = ("cand_ids", "unary", "scores", "q", "path", "n_emitted")
_DTYPES = (torch.int32, torch.float32, torch.float32, torch.float32, torch.int32, torch.int32)

_lib = torch.library.Library("dfsel", "FRAGMENT")
_lib.define("select(Tensor logits, Tensor hidden, Tensor anchors, Tensor(a!) workspace, int plan, "
            "float temperature, float p_min, int seed) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)")
_lib.define("select_out(Tensor logits, Tensor hidden, Tensor anchors, Tensor(a!) workspace, int plan, "
            "float temperature, float p_min, int seed, Tensor(b!) cand_ids, Tensor(c!) unary, "
            "Tensor(d!) scores, Tensor(e!) q, Tensor(f!) path, Tensor(g!) n_emitted) -> ()")


def _shapes(plan, n_blocks):
    d, K, L = n_blocks * plan.n_drafted, plan.top_k, plan.n_drafted
    return (d, K), (d, K), (d, K, K), (d, K), (n_blocks, L), (n_blocks,)


class _State:
    """What the operators keep per plan, so that a call only rewrites pointers: one
    dfsel_outputs struct, the workspace's device and pointer, the output shapes per n_blocks."""
    __slots__ = ("struct", "ref", "device", "workspace_ptr", "shapes")

    def __init__(self, plan):
        self.struct = _abi.Outputs()
        self.ref = ctypes.pointer(self.struct)
        self.device = plan.workspace.device
        self.workspace_ptr = plan.workspace.data_ptr()
        self.shapes = {}

    def shapes_for(self, plan, n_blocks):
        s = self.shapes.get(n_blocks)
        if s is None:
            s = self.shapes[n_blocks] = _shapes(plan, n_blocks)
        return s

    def point_at(self, tensors):
        st = self.struct
        st.cand_ids, st.unary, st.scores, st.q, st.path, st.n_emitted = [t.data_ptr() for t in tensors]
        return self.ref


def _live(handle):
    p = registry.get(handle)
    if p is None:
        raise Error(Status.INVALID_ARGUMENT, "plan = %d is not the handle of a live dfsel.Plan" % handle)
    if p.workspace is None:
        raise Error(Status.INVALID_ARGUMENT, "plan = %d (%r) was not made of torch tensors: it has no "
                    "plan.workspace for torch.ops.dfsel to name; make the plan from torch tensors" % (handle, p))
    return p


def _state(handle, workspace):
    """The plan, its operator state, and whether `workspace` is a copy of plan.workspace."""
    p = _live(handle)
    s = p.__dict__.get("_torch_op")
    if s is None:
        s = p._torch_op = _State(p)
    if workspace is p.workspace or (workspace.data_ptr() == s.workspace_ptr and workspace.shape == p.workspace.shape):
        return p, s, False
    # torch.compile's functionalization may hand the operator a copy of the workspace when it
    # cannot write the original in place; another plan's workspace is refused.
    ws = p.workspace
    if workspace.dtype != ws.dtype or workspace.shape != ws.shape or workspace.device != ws.device or any(
            q.workspace is not None and q.workspace.data_ptr() == workspace.data_ptr() for q in registry.values()):
        raise Error(Status.INVALID_ARGUMENT, "workspace is not plan.workspace of plan = %d (%s %s on %s; the "
                    "plan's is %s %s on %s at %#x)" % (handle, workspace.dtype, tuple(workspace.shape),
                                                      workspace.device, ws.dtype, tuple(ws.shape), ws.device,
                                                      s.workspace_ptr))
    return p, s, True


def _stream(plan):
    return None if plan.device is None else (torch.cuda.current_stream(plan.device).cuda_stream or None)


def _select(logits, hidden, anchors, workspace, plan, temperature, p_min, seed):
    p, s, copied = _state(plan, workspace)
    out = []

    def outputs_for(n_blocks):  # after the inputs are checked: nothing is allocated for a refused call
        for shape, dtype in zip(s.shapes_for(p, n_blocks), _DTYPES):
            out.append(torch.empty(shape, dtype=dtype, device=s.device))
        if temperature <= 0:
            out[3].zero_()  # a greedy run does not write q
        return s.point_at(out)

    # The schema's int is int64: a negative seed stands for the uint64 of the same bits.
    p._run_into(logits, hidden, anchors, temperature, p_min, seed & _U64, outputs_for, _stream(p))
    if copied:  # the copy takes the state the run left, so writing it back changes nothing
        workspace.copy_(p.workspace)
    return tuple(out)


def _select_out(logits, hidden, anchors, workspace, plan, temperature, p_min, seed,
                cand_ids, unary, scores, q, path, n_emitted):
    p, s, copied = _state(plan, workspace)
    given = (cand_ids, unary, scores, q, path, n_emitted)

    def outputs_for(n_blocks):
        # Buffers for m >= n_blocks blocks, m read from path [m, L]; a run writes the leading rows.
        m = path.shape[0] if path.dim() == 2 else -1
        if m < n_blocks:
            raise Error(Status.INVALID_ARGUMENT, "path has shape %s; expected (m, %d) with m >= n_blocks = %d" % (
                tuple(path.shape), p.n_drafted, n_blocks))
        for name, t, shape, dtype in zip(_NAMES, given, s.shapes_for(p, m), _DTYPES):
            if t.dtype != dtype or t.shape != shape or t.device != s.device or not t.is_contiguous():
                raise Error(Status.INVALID_ARGUMENT, "%s is %s %s on %s%s; expected a contiguous %s %s on %s "
                            "(outputs for %d blocks)" % (name, t.dtype, tuple(t.shape), t.device,
                                                         "" if t.is_contiguous() else ", not contiguous", dtype,
                                                         shape, s.device, m))
        return s.point_at(given)

    p._run_into(logits, hidden, anchors, temperature, p_min, seed & _U64, outputs_for, _stream(p))
    if copied:
        workspace.copy_(p.workspace)


for _key in ("CPU", "CUDA"):
    _lib.impl("select", _select, _key)
    _lib.impl("select_out", _select_out, _key)


@torch.library.register_fake("dfsel::select", lib=_lib)
def _select_fake(logits, hidden, anchors, workspace, plan, temperature, p_min, seed):
    return tuple(logits.new_empty(shape, dtype=dtype)
                 for shape, dtype in zip(_shapes(_live(plan), anchors.shape[0]), _DTYPES))


@torch.library.register_fake("dfsel::select_out", lib=_lib)
def _select_out_fake(logits, hidden, anchors, workspace, plan, temperature, p_min, seed,
                     cand_ids, unary, scores, q, path, n_emitted):
    return None
