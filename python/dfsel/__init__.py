"""dfsel from Python: the DFlash2 candidate selector on a vocabulary split across GPUs,
over the C ABI of libdfsel.so (ctypes; nothing to compile).

    plan = dfsel.Plan(n_vocab=V, n_embd=E, codebook_rank=256, top_k=16, block_size=16,
                      max_blocks=4, e_prev=e_prev, e_next=e_next, w_h=w_h,
                      rank=r, n_ranks=S, v_begin=vb, v_end=ve, nccl_comm=comm)
    out = plan.outputs(n_blocks)                 # once; then every run is allocation-free
    plan.run(logits, hidden, anchors, out=out)   # on torch's current stream
    drafts, n = out.path, out.n_emitted

dfsel.DSparkPlan and dfsel.dspark_run_group run a DSpark draft's Markov chain the same way:
NumPy arrays on the CPU backend, CUDA arrays (torch, ...) on the CUDA backend, where a library
whose CUDA backend refuses DSpark plans raises dfsel.Error (UNSUPPORTED) at plan creation.

libdfsel.so is found through DFSEL_LIBRARY, next to this package (pip install bundles it
there), or on the loader path. Every failure raises dfsel.Error(status, message): integers
are checked against their C fields and outputs against the plan before anything runs.

A plan serves one call at a time: a call on a plan that another thread is using raises
dfsel.Error with status Status.BUSY at once; give each thread its own plan.
"""
from ._abi import Backend, Error, Placement, Status, Type
from ._arrays import typed
from ._dspark import DSparkOutputs, DSparkPlan, dspark_run_group
from ._loader import cuda_device_count, library, library_path, status_string, version
from ._outputs import Outputs
from ._plan import Plan, run_group
from ._version import __version__

# torch.ops.dfsel.select when torch is importable; why not otherwise.
torch_op_error = None
try:
    from . import _torch_op  # noqa: F401
except ImportError as e:
    torch_op_error = "torch is not importable (%s)" % e
except Exception as e:  # a torch too old for torch.library.custom_op, or a broken install
    torch_op_error = "torch.ops.dfsel.select was not registered: %s: %s" % (type(e).__name__, e)

__all__ = ["Backend", "DSparkOutputs", "DSparkPlan", "Error", "Outputs", "Placement", "Plan", "Status", "Type",
           "cuda_device_count", "dspark_run_group", "library", "library_path", "run_group", "status_string", "typed",
           "version", "torch_op_error"]
