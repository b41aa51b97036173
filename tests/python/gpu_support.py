"""Shared by the GPU tests: the skip rules, problems of realistic size made with torch on the
GPU, and the selector in plain torch (stable sort and torch.topk for the candidates, gathers,
einsum in float64) whose lattice feeds the argmax / sampling walk check of the CPU tests
(selector_reference.check_walk, which recognises near-ties).

With DFSEL_REQUIRE_GPU=1 (python/run-gpu-tests.sh) a missing torch, CUDA device or CUDA
backend fails the GPU tests instead of skipping them.
"""
import os

import numpy as np
import pytest

import dfsel
from selector_reference import EPS32, check_walk

REQUIRE = os.environ.get("DFSEL_REQUIRE_GPU") == "1"


def need(condition, reason):
    if not condition:
        if REQUIRE:
            pytest.fail(reason + " (DFSEL_REQUIRE_GPU=1)")
        pytest.skip(reason)


def captured(torch, run):
    """run() once on a side stream (the warm-up torch asks for before capture), then captured in
    a CUDA graph on the current stream. Returns the graph and what the captured call returned."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = run()
    return graph, got


def torch_or_skip():
    try:
        import torch
    except ImportError as e:
        need(False, "torch is not importable: %s" % e)
    need(torch.cuda.is_available(), "torch sees no CUDA device")
    need(dfsel.cuda_device_count() > 0, "libdfsel.so has no CUDA backend or sees no GPU (%s)" % dfsel.library_path())
    return torch


# V, E, R, K, block_size: the z-lab DFlash2 sizes of SPEC section 1
REALISTIC = dict(V=248320, E=5120, R=256, K=16, block_size=16)


class TorchProblem:
    """Weights and inputs on cuda:device; logits / hidden of dtype ldt / hdt, codebooks and
    W_h of dtype wdt (BF16 as in the safetensors drafts)."""

    def __init__(self, torch, seed, n_blocks, V, E, R, K, block_size, ldt, hdt, wdt, device=0, ties=False):
        g = torch.Generator(device="cuda:%d" % device).manual_seed(seed)
        dev = "cuda:%d" % device
        self.torch, self.dev, self.K, self.block_size, self.V, self.E, self.R = torch, dev, K, block_size, V, E, R
        self.n_blocks = n_blocks
        rn = lambda *s: torch.randn(*s, generator=g, device=dev)  # noqa: E731
        self.e_prev = (rn(V, R) * 0.5).to(wdt)
        self.e_next = (rn(V, R) * 0.5).to(wdt)
        self.w_h = (rn(R, E) / E ** 0.5).to(wdt)
        self.ldt, self.hdt = ldt, hdt
        self.ties = ties
        self.new_inputs(seed + 1)

    def new_inputs(self, seed):
        torch = self.torch
        g = torch.Generator(device=self.dev).manual_seed(seed)
        n = self.n_blocks * self.block_size
        z = torch.randn(n, self.V, generator=g, device=self.dev) * 3
        if self.ties:
            z = torch.round(z * 2) / 2
        self.logits = z.to(self.ldt)
        self.hidden = torch.randn(n, self.E, generator=g, device=self.dev).to(self.hdt)
        self.anchors = torch.randint(0, self.V, (self.n_blocks,), generator=g, device=self.dev, dtype=torch.int32)
        return self

    def plan(self, **kw):
        args = dict(n_vocab=self.V, n_embd=self.E, codebook_rank=self.R, top_k=self.K, block_size=self.block_size,
                    max_blocks=self.n_blocks, e_prev=self.e_prev, e_next=self.e_next, w_h=self.w_h)
        args.update(kw)
        return dfsel.Plan(**args)


def torch_lattice(p, scale=1.0):
    """cand, unary, scores, tol as NumPy arrays, computed with torch on the GPU."""
    torch = p.torch
    K, B = p.K, p.block_size
    L = B - 1
    rows = torch.tensor([b * B + q for b in range(p.n_blocks) for q in range(1, B)], device=p.dev)
    z = p.logits[rows].float()
    # candidate order: value descending, id ascending. torch.topk leaves the order of equal
    # values open, so the ids come from a stable sort and torch.topk checks the values.
    cand = torch.sort(z, dim=1, descending=True, stable=True).indices[:, :K]
    unary = torch.gather(z, 1, cand) * scale
    assert torch.equal(torch.topk(z, K, dim=1).values * scale, unary)
    h = p.hidden[rows].double()
    w = p.w_h.double()
    g = torch.einsum("de,re->dr", h, w)
    g_abs = torch.einsum("de,re->dr", h.abs(), w.abs())
    ep, en = p.e_prev.double(), p.e_next.double()
    D = rows.numel()
    prev = cand.roll(1, dims=0).clone()
    anchors = p.anchors.long().repeat_interleave(L)
    first = torch.arange(D, device=p.dev) % L == 0
    prev[first] = anchors[first].unsqueeze(1).expand(-1, K)
    P, N = ep[prev], en[cand]                                  # [D, K, R]
    terms_sum = torch.einsum("dir,dr,djr->dij", P, g, N)
    mag = torch.einsum("dir,dr,djr->dij", P.abs(), g.abs(), N.abs()) + unary.double().abs().unsqueeze(1)
    gate_err = p.E * EPS32 * torch.einsum("dir,dr,djr->dij", P.abs(), g_abs, N.abs())
    scores = unary.double().unsqueeze(1) + terms_sum
    tol = (p.R + 4) * EPS32 * mag + 2 * gate_err + 1e-30
    return [t.cpu().numpy() for t in (cand, unary, scores, tol)]


def to_numpy(x):
    return x.cpu().numpy() if hasattr(x, "cpu") else x.get()


def check_against_torch(p, out, temperature=0.0, p_min=0.0, seed=0):
    """The plan's outputs against the torch reference: candidates exact, unary to rounding,
    scores within their bound, and every walk step justified. Returns the near-ties."""
    cand, unary, scores, tol = torch_lattice(p)
    np.testing.assert_array_equal(to_numpy(out.cand_ids), cand)
    np.testing.assert_array_equal(to_numpy(out.unary), unary)
    lib = to_numpy(out.scores).astype(np.float64)
    bad = np.abs(lib - scores) > tol
    assert not bad.any(), "scores off at %s: %s vs %s (bound %s)" % (
        np.argwhere(bad)[:3].tolist(), lib[bad][:3], scores[bad][:3], tol[bad][:3])
    q = to_numpy(out.q) if temperature > 0 else None
    return check_walk(cand, scores, tol, to_numpy(out.path), to_numpy(out.n_emitted), q, p.block_size - 1,
                      temperature, p_min, seed)
