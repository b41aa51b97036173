"""SPEC sections 2 to 5 in NumPy, written from the specification for these tests and sharing no
code with the library: candidates, unary, gate, lattice scores in float64, and the bounds of
float32 rounding that tell a real mismatch from a near-tie.

Storage helpers make the raw forms the package takes (BF16 bits, Q8_0 and Q4_0 blocks) and
decode them.
"""
import numpy as np

EPS32 = 2.0 ** -24


# -- storage ---------------------------------------------------------------------------------
def to_bf16_bits(x):
    """float32 -> bfloat16 bits (uint16), round to nearest even; NaN stays NaN."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    out[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def from_bf16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def to_q8_0(x):
    """[rows, n] float32 (n % 32 == 0) -> (blocks [rows, n/32*34] uint8, decoded float32)."""
    rows, n = x.shape
    blocks = x.reshape(rows, n // 32, 32).astype(np.float32)
    amax = np.abs(blocks).max(axis=2)
    d = (amax / 127.0).astype(np.float16)
    df = d.astype(np.float32)
    safe = np.where(df == 0, 1.0, df)
    q = np.clip(np.rint(blocks / safe[..., None]), -128, 127).astype(np.int8)
    q[df == 0] = 0
    raw = np.empty((rows, n // 32, 34), dtype=np.uint8)
    raw[..., 0:2] = d.reshape(rows, n // 32, 1).view(np.uint8).reshape(rows, n // 32, 2)
    raw[..., 2:] = q.view(np.uint8)
    decoded = (df[..., None] * q.astype(np.float32)).reshape(rows, n)
    return raw.reshape(rows, n // 32 * 34), decoded


def to_q4_0(x):
    """[rows, n] float32 (n % 32 == 0) -> (blocks [rows, n/32*18] uint8, decoded float32 as the
    library computes with it: widened to BF16). ggml's block: f16 d, then 16 bytes; element j
    in the low nibble of byte j, element j + 16 in its high nibble; value (nibble - 8) * d."""
    rows, n = x.shape
    blocks = x.reshape(rows, n // 32, 32).astype(np.float32)
    d = (np.abs(blocks).max(axis=2) / 7.0).astype(np.float16)
    df = d.astype(np.float32)
    safe = np.where(df == 0, 1.0, df)
    q = (np.clip(np.rint(blocks / safe[..., None]), -8, 7) + 8).astype(np.uint8)
    q[df == 0] = 8
    raw = np.empty((rows, n // 32, 18), dtype=np.uint8)
    raw[..., 0:2] = d.reshape(rows, n // 32, 1).view(np.uint8).reshape(rows, n // 32, 2)
    raw[..., 2:] = q[..., :16] | (q[..., 16:] << 4)
    decoded = (df[..., None] * (q.astype(np.float32) - 8)).reshape(rows, n)
    return raw.reshape(rows, n // 32 * 18), from_bf16_bits(to_bf16_bits(decoded))


# -- Philox4x32-10 ------------------------------------------------------------------------------
def philox4(seed, c):
    """The four words of Philox4x32-10 at counter c (four 32-bit words) under key seed."""
    M32 = 0xFFFFFFFF
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


def philox_uniform(seed, block, position):
    """The DFlash2 walk's draw keyed by (seed, block, position)."""
    return (philox4(seed, [block & 0xFFFFFFFF, position & 0xFFFFFFFF, 0x64667365, 0])[0] >> 8) / 16777216.0


# -- the selector -----------------------------------------------------------------------------
def candidates(z, K):
    """Per row: the K largest raw logits, value descending (-0 == +0), id ascending, NaN last."""
    ids = np.arange(z.shape[1])
    out = np.empty((z.shape[0], K), dtype=np.int64)
    for t in range(z.shape[0]):
        row = z[t].astype(np.float64)
        nan = np.isnan(row)
        neg = np.where(nan, 0.0, -row) + 0.0  # + 0.0 folds -0 into +0
        out[t] = np.lexsort((ids, neg, nan))[:K]
    return out


def transform(z, scale, softcap):
    x = np.float32(scale) * z.astype(np.float32)
    if softcap > 0:
        return (np.float32(softcap) * np.tanh(x / np.float32(softcap))).astype(np.float32)
    return x


def softmax(s, temperature):
    """softmax(s / T) of one row by the design's rules: NaN weighs 0; a row with nothing above
    -inf is uniform; a +inf maximum shares the mass among the +inf scores."""
    finite = s[~np.isnan(s)]
    m = finite.max() if finite.size else -np.inf
    if m == -np.inf:
        return np.full(s.shape, 1.0 / s.size)
    if m == np.inf:
        w = (s == np.inf).astype(np.float64)
    else:
        with np.errstate(invalid="ignore"):
            w = np.where(np.isnan(s), 0.0, np.exp((s - m) / temperature))
    return w / w.sum()


class Problem:
    """Decoded float inputs of one step: z [n_tokens, V], h [n_tokens, E], e_prev / e_next
    [V, R], w_h [R, E], anchors [n_blocks]."""

    def __init__(self, z, h, e_prev, e_next, w_h, anchors, K, block_size, scale=1.0, softcap=0.0):
        self.z, self.h, self.e_prev, self.e_next, self.w_h = z, h, e_prev, e_next, w_h
        self.anchors, self.K, self.block_size = anchors, K, block_size
        self.scale, self.softcap = scale, softcap


def lattice(pr):
    """cand [D, K], unary [D, K], scores [D, K, K] (float64) and the rounding bound of each
    score, tol [D, K, K], for D = n_blocks * L drafted rows."""
    K, B = pr.K, pr.block_size
    L = B - 1
    n_blocks = len(pr.anchors)
    rows = np.array([b * B + p for b in range(n_blocks) for p in range(1, B)])
    cand = candidates(pr.z[rows], K)
    unary = transform(np.take_along_axis(pr.z[rows], cand, axis=1), pr.scale, pr.softcap)
    h = pr.h[rows].astype(np.float64)
    w = pr.w_h.astype(np.float64)
    g = h @ w.T                              # [D, R]
    g_abs = np.abs(h) @ np.abs(w).T          # bounds the gate's own rounding
    E, R = w.shape[1], w.shape[0]
    ep, en = pr.e_prev.astype(np.float64), pr.e_next.astype(np.float64)
    D = len(rows)
    scores = np.empty((D, K, K))
    tol = np.empty((D, K, K))
    for d in range(D):
        b, p = divmod(d, L)
        p += 1
        prev = np.array([pr.anchors[b]] * K) if p == 1 else cand[d - 1]
        P, N = ep[prev], en[cand[d]]          # [K, R]
        terms = np.einsum("ir,r,jr->ijr", P, g[d], N)
        u = unary[d].astype(np.float64)
        with np.errstate(invalid="ignore"):
            scores[d] = u[None, :] + terms.sum(axis=2)
        mag = np.abs(terms).sum(axis=2) + np.abs(np.where(np.isfinite(u), u, 0.0))[None, :]
        gate_err = E * EPS32 * np.einsum("ir,r,jr->ij", np.abs(P), g_abs[d], np.abs(N))
        tol[d] = (R + 4) * EPS32 * mag + 2 * gate_err + 1e-30
    return cand, unary, scores, tol


def _greedy_choices(s, tol):
    """The j a greedy step may take: the lowest argmax (NaN never wins), or any j whose score is
    within rounding of the best (a near-tie). A row of only NaN / -inf takes j = 0."""
    ok = ~np.isnan(s)
    if not ok.any() or s[ok].max() == -np.inf:
        return {0}, 0
    best = int(np.flatnonzero(ok & (s == s[ok].max()))[0])
    if not np.isfinite(s[best]):
        return {best}, best
    near = ok & (s >= s[best] - tol - tol[best])
    return set(int(j) for j in np.flatnonzero(near)), best


def _sample_choices(q, q_tol, u):
    """The j inverse-CDF sampling at u may take: the exact one, or a neighbour when u lies
    within rounding of a boundary of the cumulative sum."""
    c = np.cumsum(q)
    exact = next((j for j in range(len(q)) if u < c[j] and q[j] > 0), int(np.flatnonzero(q > 0)[-1]))
    slack = np.cumsum(q_tol) + 1e-6
    lo = np.concatenate([[0.0], c[:-1]])
    near = {j for j in range(len(q)) if q[j] + q_tol[j] > 0 and lo[j] - slack[j] <= u < c[j] + slack[j]}
    if u >= c[-1] - slack[-1]:
        near |= {int(j) for j in np.flatnonzero(q + q_tol > 0)[-1:]}
    return near | {exact}, exact


def check_walk(cand, scores, tol, path, n_emitted, q, L, temperature, p_min, seed):
    """Follows the library's walk step by step and checks that each choice, each p_min stop and
    each q row is what SPEC section 5 gives from the float64 scores, up to the rounding of
    scores (tol). Returns how many steps were near-ties that went the other way."""
    K = cand.shape[1]
    n_blocks = len(n_emitted)
    near_ties = 0
    for b in range(n_blocks):
        prev, stopped, emitted = 0, False, 0
        for p in range(1, L + 1):
            d = b * L + p - 1
            where = "block %d position %d" % (b, p)
            if stopped:
                assert path[b, p - 1] == -1, where + ": a token after the stop"
                if q is not None:
                    assert np.all(q[d] == 0), where + ": q after the stop is not zero"
                continue
            s, t = scores[d, prev], tol[d, prev]
            delta = float(np.nanmax(np.where(np.isfinite(t), t, 0.0)))
            if temperature > 0:
                q_ref = softmax(s, temperature)
                q_tol = q_ref * np.expm1(2 * delta / temperature) + 8 * K * EPS32 * q_ref + 1e-7
                assert q is not None
                assert np.all(np.abs(q[d] - q_ref) <= q_tol), "%s: q %s, expected %s" % (where, q[d], q_ref)
                allowed, exact = _sample_choices(q_ref, q_tol, philox_uniform(seed, b, p))
            else:
                allowed, exact = _greedy_choices(s, t)
            pick = softmax(s, 1.0)
            p_tol = pick * np.expm1(2 * delta) + 8 * K * EPS32 + 1e-7
            tok = path[b, p - 1]
            if tok == -1:  # the library stopped: some allowed choice must fall below p_min
                assert p_min > 0 and any(pick[j] < p_min + p_tol[j] for j in allowed), \
                    "%s: stopped, but p = %s of the choices %s is not below p_min = %g" % (
                        where, pick[sorted(allowed)], sorted(allowed), p_min)
                stopped = True
                continue
            hits = np.flatnonzero(cand[d] == tok)
            assert hits.size == 1, "%s: drafted token %d is not a candidate %s" % (where, tok, cand[d])
            j = int(hits[0])
            assert j in allowed, "%s: took j = %d (score %r), allowed %s of scores %s" % (
                where, j, s[j], sorted(allowed), s)
            assert not (p_min > 0 and pick[j] < p_min - p_tol[j]), \
                "%s: emitted j = %d with p = %g below p_min = %g" % (where, j, pick[j], p_min)
            near_ties += j != exact
            prev, emitted = j, emitted + 1
        assert n_emitted[b] == emitted, "block %d: n_emitted %d, path has %d" % (b, n_emitted[b], emitted)
    return near_ties
