"""The DSpark chain of docs/dspark.md in NumPy, in double precision, along a run's own tokens:
every l of a step from its definition, the greedy choice or the Gumbel-max draw (the noise
keyed by (seed, block, step, token id) as the contract states), the normaliser, and the
confidence head. A step whose two best keys lie within rounding may go either way: the rest
of that block is not checked."""
import math

import numpy as np

from selector_reference import philox4


def gumbel(seed, block, step, ids):
    """The noise of token ids at a step: Philox4x32-10 at (id >> 2, block, step, "dspk"), word
    id & 3, an odd multiple of 2^-24, then -log(-log(u)) in float32 (the library uses its own log, within two ulp of this)."""
    out = np.empty(len(ids), dtype=np.float64)
    cache = {}
    for i, v in enumerate(int(x) for x in ids):
        q = v >> 2
        if q not in cache:
            cache[q] = philox4(seed, [q, block, step, 0x6473706B])
        u = np.float32(((cache[q][v & 3] >> 8) | 1) * (1.0 / 16777216.0))
        out[i] = -np.log(-np.log(u, dtype=np.float32), dtype=np.float32)
    return out


def check_chain(pr, out, temperature, p_min, seed, tol=1e-4):
    """pr: a dict of float64 arrays z [rows, V], w1 [V_target, R], w2 [V, R], scale (None, [1] or
    [V]), conf (None or [E + R]), conf_bias, h [rows, E], d2t (None or [V]), anchors, N,
    from_anchor. out: a DSparkOutputs. Returns the steps compared (a p_min stop is one)."""
    N, V = pr["N"], pr["w2"].shape[0]
    rows = N if pr["from_anchor"] else N + 1
    compared = 0
    for b, anchor in enumerate(pr["anchors"]):
        prev = int(anchor)
        for k in range(1, N + 1):
            row = b * rows + (k - 1 if pr["from_anchor"] else k)
            e = pr["w1"][prev]
            if pr["conf"] is not None:
                x = pr["conf"] @ np.concatenate([pr["h"][row], e]) + pr["conf_bias"]
                conf = 1.0 / (1.0 + math.exp(-x))
                assert abs(out.confidence[b, k - 1] - conf) <= tol, (b, k, out.confidence[b, k - 1], conf)
                if p_min > 0 and abs(conf - p_min) <= tol:
                    break
                if p_min > 0 and conf < p_min:
                    assert out.tokens[b, k - 1] == -1 and out.n_emitted[b] == k - 1, (b, k)
                    compared += 1
                    break
            bias = pr["w2"] @ e
            if pr["scale"] is not None:
                bias = bias * pr["scale"]
            l = pr["z"][row] + bias
            key = l / temperature + gumbel(seed, b, k, np.arange(V)) if temperature > 0 else l
            order = np.argsort(-key, kind="stable")
            if V > 1 and 0 < key[order[0]] - key[order[1]] <= tol * (1 + abs(key[order[0]])):
                break
            best = int(order[0])
            want = int(pr["d2t"][best]) if pr["d2t"] is not None else best
            assert out.tokens[b, k - 1] == want, (b, k, out.tokens[b, k - 1], want)
            assert abs(out.logits[b, k - 1] - l[best]) <= tol * (1 + abs(l[best])), (b, k)
            if temperature > 0:
                m = l.max()
                z = np.exp((l - m) / temperature).sum()
                assert abs(out.log_norm[b, k - 1] - (m / temperature + math.log(z))) <= tol * (1 + abs(m / temperature))
                assert abs(out.probs[b, k - 1] - math.exp((l[best] - m) / temperature) / z) <= tol
            prev = want
            compared += 1
        else:
            assert out.n_emitted[b] == N, (b, out.n_emitted[b])
    return compared
