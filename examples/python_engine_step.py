#!/usr/bin/env python3
"""The draft-token step of a tensor-parallel engine (vLLM, SGLang) with dfsel, one process
per GPU. Each rank holds its lm_head shard's logits [n_tokens, V_shard] and the TP group's
NCCL communicator; dfsel picks the drafts from the shards (one small all-gather of K records
per shard, never the logits) and leaves them on the GPU for the verifier.

In an engine the communicator already exists: vLLM's PyNcclCommunicator keeps it as
`pynccl_comm.comm` (a ctypes ncclComm_t), CuPy's NcclCommunicator as `.comm` (an int); dfsel
takes either, or the communicator object itself.
This demo makes one with CuPy so that it runs alone:

  NCCL_NVLS_ENABLE=0 python3 examples/python_engine_step.py --gpus 2
  python3 examples/python_engine_step.py --gpus 1          # one GPU, no communicator
"""
import argparse
import multiprocessing as mp
import os


class DraftSelector:
    """What the engine builds once per TP rank, next to its draft model."""

    def __init__(self, *, tp_rank, tp_size, vocab_size, vocab_start, vocab_end, codebooks, w_h,
                 n_embd, block_size, max_blocks, nccl_comm, top_k=16, sharded_codebooks=False):
        import dfsel
        e_prev, e_next = codebooks  # torch CUDA tensors [V or V_shard, R], BF16 as in the draft
        self.plan = dfsel.Plan(
            n_vocab=vocab_size, n_embd=n_embd, codebook_rank=e_prev.shape[1], top_k=top_k,
            block_size=block_size, max_blocks=max_blocks, e_prev=e_prev, e_next=e_next, w_h=w_h,
            rank=tp_rank, n_ranks=tp_size, v_begin=vocab_start, v_end=vocab_end,
            placement="sharded" if sharded_codebooks else "replicated", nccl_comm=nccl_comm)
        self.shard = vocab_end - vocab_start
        self.out = self.plan.outputs(max_blocks)  # allocated once: every step is capturable

    def __call__(self, logits, hidden, anchors, temperature=0.0, seed=0):
        """logits: this rank's lm_head output [n_tokens, padded shard]; the padding columns of a
        vocab-parallel lm_head are cut off by a view (no copy). Runs on torch's current stream,
        so it can sit inside the engine's CUDA graph of the decode step."""
        self.plan.run(logits[:, :self.shard], hidden, anchors, temperature=temperature, seed=seed, out=self.out)
        n = anchors.shape[0]
        return self.out.path[:n], self.out.n_emitted[:n]  # drafts [n, block_size-1], -1 padded


def rank_main(rank, world, uid, V, E, R, block, blocks):
    import torch
    torch.cuda.set_device(rank)
    comm = None
    if world > 1:
        import cupy
        from cupy.cuda import nccl
        cupy.cuda.Device(rank).use()
        comm = nccl.NcclCommunicator(world, uid, rank)
    g = torch.Generator(device="cuda").manual_seed(0)  # the same weights on every rank
    rn = lambda *s: torch.randn(*s, generator=g, device="cuda")  # noqa: E731
    codebooks = ((rn(V, R) * 0.5).bfloat16(), (rn(V, R) * 0.5).bfloat16())
    w_h = (rn(R, E) / E ** 0.5).bfloat16()
    per_rank = -(-V // world // 64) * 64  # a vocab-parallel lm_head pads each shard to 64
    start, end = rank * per_rank, min(V, (rank + 1) * per_rank)
    selector = DraftSelector(tp_rank=rank, tp_size=world, vocab_size=V, vocab_start=start, vocab_end=end,
                             codebooks=codebooks, w_h=w_h, n_embd=E, block_size=block, max_blocks=blocks,
                             nccl_comm=comm.comm if comm else None)
    full = rn(blocks * block, V) * 3  # what a single GPU would see; each rank keeps its columns
    logits = torch.full((blocks * block, per_rank), float("-inf"), device="cuda")
    logits[:, :end - start] = full[:, start:end]
    hidden = rn(blocks * block, E).bfloat16()
    anchors = torch.arange(blocks, dtype=torch.int32, device="cuda") * 1000 + 17
    drafts, n = selector(logits, hidden, anchors)
    selector.plan.check(timeout_ms=60000)
    if rank == 0:
        for b in range(blocks):
            print("block %d: anchor %d, %d drafted: %s" % (b, anchors[b].item(), n[b].item(),
                                                          drafts[b, :n[b]].tolist()))
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=248320)
    ap.add_argument("--embd", type=int, default=5120)
    ap.add_argument("--blocks", type=int, default=2)
    a = ap.parse_args()
    uid = None
    if a.gpus > 1:
        from cupy.cuda import nccl
        uid = nccl.get_unique_id()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, a.gpus, uid, a.vocab, a.embd, 256, 16, a.blocks))
             for r in range(a.gpus)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
