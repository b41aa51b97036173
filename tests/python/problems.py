"""Random selector problems for the tests: full-vocabulary inputs in the storage forms the
package takes, their decoded floats (selector_reference.Problem), and plans for S shards."""
import numpy as np

import dfsel
from selector_reference import Problem, from_bf16_bits, to_bf16_bits, to_q4_0, to_q8_0


def store(x, kind):
    """(what the package is given, the decoded float32 values) for storage kind
    f32/f16/bf16/q8_0/q4_0 (Q4_0: the values widened to BF16, as plan creation does)."""
    if kind == "f32":
        return x.astype(np.float32), x.astype(np.float32)
    if kind == "f16":
        a = x.astype(np.float16)
        return a, a.astype(np.float32)
    if kind == "bf16":
        bits = to_bf16_bits(x.astype(np.float32))
        return dfsel.typed(bits, "bf16"), from_bf16_bits(bits)
    if kind in ("q8_0", "q4_0"):
        raw, decoded = (to_q8_0 if kind == "q8_0" else to_q4_0)(x.astype(np.float32))
        return dfsel.typed(raw, kind), decoded
    raise ValueError(kind)


def logits(rng, n_tokens, V, ties=False, masked=False, nan=False):
    z = rng.standard_normal((n_tokens, V)).astype(np.float32) * 3
    if ties:  # a coarse grid: many equal logits, ordered by id
        z = np.round(z * 2) / 2
    if masked:  # some rows keep fewer finite values than K
        for t in range(0, n_tokens, 3):
            keep = rng.integers(0, 4)
            z[t, rng.permutation(V)[keep:]] = -np.inf
    if nan:
        z[rng.random(z.shape) < 0.02] = np.nan
    return z


def split(rng, V, S, K):
    """S contiguous vocabulary ranges of random sizes, each at least K tokens."""
    if S == 1:
        return [(0, V)]
    cuts = np.sort(rng.choice(np.arange(K, V - K + 1), S - 1, replace=False))
    while np.any(np.diff(np.concatenate([[0], cuts, [V]])) < K):
        cuts = np.sort(rng.choice(np.arange(K, V - K + 1), S - 1, replace=False))
    edges = [0] + [int(c) for c in cuts] + [V]
    return list(zip(edges[:-1], edges[1:]))


class Case:
    """One problem: plans for its shards, the inputs of each shard, and the reference."""

    def __init__(self, rng, *, V, E, R, K, block_size, n_blocks, S, placement, logit_kind,
                 hidden_kind, weight_kind, scale=1.0, softcap=0.0, ties=False, masked=False, nan=False):
        n_tokens = n_blocks * block_size
        z = logits(rng, n_tokens, V, ties, masked, nan)
        self.logits_full, z_dec = store(z, logit_kind)
        h_in, h_dec = store(rng.standard_normal((n_tokens, E)).astype(np.float32), hidden_kind)
        weights = [rng.standard_normal(shape).astype(np.float32) * s
                   for shape, s in (((V, R), 0.5), ((V, R), 0.5), ((R, E), 1.0 / np.sqrt(E)))]
        stored = [store(w, weight_kind) for w in weights]
        anchors = rng.integers(0, V, n_blocks).astype(np.int32)
        self.problem = Problem(z_dec, h_dec, stored[0][1], stored[1][1], stored[2][1], anchors, K,
                               block_size, scale, softcap)
        self.ranges = split(rng, V, S, K)
        self.plans, self.logits, self.hidden, self.anchors = [], [], [], []
        for r, (vb, ve) in enumerate(self.ranges):
            e_prev, e_next = stored[0][0], stored[1][0]
            if placement == "sharded":
                e_prev, e_next = (_rows(e_prev, vb, ve), _rows(e_next, vb, ve))
            self.plans.append(dfsel.Plan(
                n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=block_size,
                max_blocks=n_blocks, e_prev=e_prev, e_next=e_next, w_h=stored[2][0],
                logit_scale=scale, softcap=softcap, rank=r, n_ranks=S, v_begin=vb, v_end=ve,
                placement=placement, backend="cpu"))
            self.logits.append(_cols(self.logits_full, vb, ve))  # a strided view: rows of V
            self.hidden.append(h_in)
            self.anchors.append(anchors)

    def close(self):
        for p in self.plans:
            p.close()


def _rows(x, vb, ve):
    return dfsel.typed(x.array[vb:ve], x.type) if isinstance(x, dfsel.typed) else x[vb:ve]


def _cols(x, vb, ve):
    return dfsel.typed(x.array[:, vb:ve], x.type) if isinstance(x, dfsel.typed) else x[:, vb:ve]
