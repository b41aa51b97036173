"""Two GPUs, one process each, over a CuPy NCCL communicator passed to dfsel as an integer
ncclComm_t: every rank's outputs bitwise equal, in both placements, greedy and sampling, and
equal to one GPU holding the whole vocabulary. Skips with fewer than two GPUs."""
import multiprocessing as mp
import os
import sys

import pytest

from gpu_support import torch_or_skip


def test_two_ranks_over_nccl_are_bitwise_equal():
    torch = torch_or_skip()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs, found %d" % torch.cuda.device_count())
    try:
        from cupy.cuda import nccl
    except ImportError as e:
        pytest.skip("CuPy's NCCL binding is not importable: %s" % e)
    import nccl_worker

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast on these machines
    ctx = mp.get_context("spawn")
    uid = nccl.get_unique_id()
    cfg = {"seed": 77, "n_blocks": 2, "sys_path": list(sys.path)}
    pipes, procs = [], []
    for rank in range(2):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=nccl_worker.rank_main, args=(rank, 2, uid, child, cfg))
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    try:
        replies = []
        for rank, pipe in enumerate(pipes):
            assert pipe.poll(300), "rank %d did not answer within 300 s" % rank
            replies.append(pipe.recv())
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.terminate()
    for status, payload in replies:
        assert status == "ok", payload
    r0, r1 = replies[0][1], replies[1][1]
    for key in (("replicated", 0.0), ("replicated", 0.9), ("sharded", 0.0), ("sharded", 0.9)):
        assert r0[key] == r1[key], "ranks differ for %s" % (key,)
        assert r0[key] == r0[("single", key[1])], "two ranks differ from one GPU for %s" % (key,)


def test_one_rank_communicator_from_cupy():
    """nccl_comm= takes CuPy's communicator (its .comm, or the object itself) on one GPU too:
    a group of one gives the bits of a plan without a communicator."""
    torch = torch_or_skip()
    try:
        from cupy.cuda import nccl
    except ImportError as e:
        pytest.skip("CuPy's NCCL binding is not importable: %s" % e)
    from gpu_support import REALISTIC, TorchProblem

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    p = TorchProblem(torch, 55, 2, ldt=torch.float32, hdt=torch.bfloat16, wdt=torch.bfloat16, **REALISTIC)
    want = p.plan().run(p.logits, p.hidden, p.anchors, temperature=0.5, seed=3)
    for handle in (comm.comm, comm):
        plan = p.plan(nccl_comm=handle)
        got = plan.run(p.logits, p.hidden, p.anchors, temperature=0.5, seed=3)
        plan.check(timeout_ms=60000)
        for k, v in want.as_dict().items():
            assert v.cpu().numpy().tobytes() == got.as_dict()[k].cpu().numpy().tobytes(), k
        plan.close()
