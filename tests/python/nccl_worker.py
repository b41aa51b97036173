"""One rank of the two-GPU test (test_gpu_nccl.py), in its own process on GPU `rank`: a CuPy
NCCL communicator, a dfsel plan for this rank's vocabulary shard, and the outputs sent back
as bytes for the parent to compare."""
import os
import sys


def rank_main(rank, n_ranks, uid, conn, cfg):
    try:
        sys.path[:0] = cfg["sys_path"]
        import cupy
        import torch
        from cupy.cuda import nccl

        import dfsel
        from gpu_support import REALISTIC, TorchProblem

        torch.cuda.set_device(rank)
        cupy.cuda.Device(rank).use()
        comm = nccl.NcclCommunicator(n_ranks, uid, rank)
        p = TorchProblem(torch, cfg["seed"], cfg["n_blocks"], ldt=torch.bfloat16, hdt=torch.bfloat16,
                         wdt=torch.bfloat16, device=rank, **REALISTIC)
        V = p.V
        vb, ve = V * rank // n_ranks, V * (rank + 1) // n_ranks
        results = {}
        for placement in ("replicated", "sharded"):
            e_prev, e_next = (p.e_prev, p.e_next) if placement == "replicated" else (p.e_prev[vb:ve], p.e_next[vb:ve])
            plan = p.plan(e_prev=e_prev, e_next=e_next, rank=rank, n_ranks=n_ranks, v_begin=vb, v_end=ve,
                          placement=placement, nccl_comm=comm.comm)
            for temperature in (0.0, 0.9):
                out = plan.run(p.logits[:, vb:ve], p.hidden, p.anchors, temperature=temperature, seed=5)
                plan.check(timeout_ms=120000)
                results[(placement, temperature)] = {k: v.cpu().numpy().tobytes() for k, v in out.as_dict().items()}
            plan.close()
        if rank == 0:  # one shard holding the whole vocabulary: the same bits (SPEC section 4.8)
            one = p.plan()
            for temperature in (0.0, 0.9):
                out = one.run(p.logits, p.hidden, p.anchors, temperature=temperature, seed=5)
                results[("single", temperature)] = {k: v.cpu().numpy().tobytes() for k, v in out.as_dict().items()}
        conn.send(("ok", results))
    except BaseException as e:  # reported to the parent, which fails the test with it
        import traceback
        conn.send(("error", "rank %d: %s\n%s" % (rank, e, traceback.format_exc())))
    finally:
        conn.close()
        os._exit(0)
