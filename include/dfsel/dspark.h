/* dfsel DSpark plans: the Markov chain of a DSpark draft on a vocabulary split across ranks.
 *
 * A DSpark draft computes base logits z_1..z_N for the N drafted positions of a block in one
 * pass; a Markov head then drafts them strictly in order (docs/dspark.md):
 *   e_k = W1[x_(k-1)]                      x_0 the block's anchor (the last committed token)
 *   l_k[v] = T(z_k[v]) + (W2[v] . e_k) * s  every v of the draft vocabulary
 *   x_k = argmax_v l_k[v] (lowest id on ties, NaN never wins), or a Gumbel-max draw from
 *         softmax(l_k / temperature) keyed by (seed, block, step, token id)
 *   with a d2t map, x_k is the target id of the chosen draft id
 *   with a confidence head, c_k = sigmoid(w . [h_k ; e_k] + b) and the block stops before the
 *   first step with c_k < p_min.
 * T is the identity unless config.logit_scale or config.softcap is set (llama.cpp applies
 * neither to DSpark drafts); s is markov_w2.scale, 1 when absent.
 *
 * Each rank holds its draft ids [v_begin, v_end): its rows of W2, of the base logits and of
 * d2t. Per step it takes its local best, and one exchange of fixed-size records (their size
 * depends on n_blocks, R and the W1 placement, never on V) gives every rank bitwise the same
 * winner: results are bitwise the same for every shard count.
 *
 * Shapes follow ggml (ne[0] contiguous, nb[] in bytes):
 *   w1 {R, V_target} (replicated) or {R, v_end - v_begin} (sharded)   w2 {R, v_end - v_begin}
 *   w2_scale F32 {1} or {v_end - v_begin}      conf_w {n_embd + R, 1}
 *   logits {v_end - v_begin, n_blocks * rows}  hidden {n_embd, n_blocks * rows}
 * rows = N with sample_from_anchor (row k - 1 drafts step k), N + 1 without it (row 0, the
 * anchor's, is not read; row k drafts step k). Outputs are [n_blocks][N].
 *
 * The same rules as dfsel.h hold: every call returns a dfsel_status and a message naming the
 * argument and its value; a plan serves one call at a time (a call that names a plan another
 * thread's call holds is refused with DFSEL_BUSY at once, nothing read, written or recorded;
 * a destroyed plan, or a dfsel_plan given where a dfsel_dspark_plan is expected, is refused with
 * DFSEL_INVALID_ARGUMENT unread; in a fork()ed child a CPU plan runs on one thread and its
 * destruction returns: dfsel.h, Handles and fork());
 * every pointer is aligned for the type it holds, and memory a run writes (its outputs, a
 * caller-owned workspace) overlaps nothing else the run touches. The CPU backend runs a plan
 * on host memory, the CUDA backend on device memory of desc.device (every pointer: weights,
 * d2t, inputs, outputs, workspace; plan creation refuses weights, d2t or a workspace in
 * pageable host memory or on another device, the pointer named); a CUDA run is enqueued on the caller's stream, can be
 * captured in a CUDA graph, and reports what it found on the device (an anchor out of range) at
 * dfsel_dspark_plan_wait. Within a backend every output is bitwise the same for every shard
 * count, placement and batching. The CPU backend is bitwise the reference, and so is the CUDA
 * backend with its chains (DFSEL_DSPARK_PRODUCT=chains, or where its tensor-core product does not
 * apply); that product, its default where W2 is BF16, sums W2 . e in another order: the same
 * tokens but past a near-tie, the other outputs within float rounding (docs/dspark.md).
 */
#ifndef DFSEL_DSPARK_H
#define DFSEL_DSPARK_H

#include <dfsel/dfsel.h>
#include <dfsel/gguf.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dfsel_dspark_config {
  int64_t n_vocab;          /* V_draft: ids of the base logits and rows of W2, all ranks together */
  int64_t n_target_vocab;   /* V_target: rows of W1, the ids the chain emits (n_vocab without d2t) */
  int64_t n_embd;           /* width of the hidden rows the confidence head reads; 0 without one */
  int32_t markov_rank;      /* R */
  int32_t n_draft;          /* N: drafted positions per block */
  int32_t sample_from_anchor; /* 1: N logits rows a block, all drafted; 0: N + 1, row 0 the anchor's */
  float logit_scale;        /* m applied to z before the bias; 0 means 1 */
  float softcap;            /* c applied to z before the bias (c * tanh(m z / c)); <= 0 disables */
  int32_t max_blocks;       /* the most blocks one run may carry */
} dfsel_dspark_config;

typedef struct dfsel_dspark_plan_desc {
  dfsel_dspark_config config;
  dfsel_shard shard;          /* this rank's draft ids [v_begin, v_end) */
  dfsel_backend backend;
  int32_t device;
  dfsel_placement placement;  /* of W1; SHARDED needs n_target_vocab == n_vocab and no d2t */
  dfsel_tensor w1;            /* markov_w1: F32, F16, BF16, Q8_0, or a block type widened to BF16
                                 at creation (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K: dfsel.h) */
  dfsel_tensor w2;            /* markov_w2: the same types */
  dfsel_tensor w2_scale;      /* optional (data NULL): F32 {1}, or {v_end - v_begin} one per row;
                                 every value finite (read and checked at creation) */
  dfsel_tensor conf_w;        /* optional (data NULL): conf_proj {n_embd + R, 1}; every value finite
                                 (read and checked at creation) */
  float conf_bias;            /* conf_proj.bias (0 when the draft has none); finite */
  const int32_t* d2t;         /* optional: [v_end - v_begin] target id of each of this rank's draft ids; must not change */
  void* nccl_comm;            /* as in dfsel_plan_desc */
  void* workspace;            /* optional caller-owned workspace (dfsel_dspark_workspace_size), 16-byte aligned */
  size_t workspace_bytes;
  int32_t n_threads;          /* CPU backend: threads a run uses (0: every core), at most 1024 */
} dfsel_dspark_plan_desc;

typedef struct dfsel_dspark_inputs {
  dfsel_tensor logits;     /* {v_end - v_begin, n_blocks * rows}: F32, F16 or BF16 */
  dfsel_tensor hidden;     /* {n_embd, n_blocks * rows}: read with a confidence head only */
  const int32_t* anchors;  /* [n_blocks] target ids */
  int32_t n_blocks;
  float temperature;       /* <= 0: greedy; > 0: Gumbel-max sampling */
  float p_min;             /* 0 disables the confidence cut; > 0 needs a confidence head */
  uint64_t seed;           /* sampling: draws keyed by (seed, block, step, token id) */
} dfsel_dspark_inputs;

/* Every pointer is optional (NULL: not written) except tokens and n_emitted. After the last
 * emitted step a block's tokens and draft_ids are -1 and its other outputs 0, except the
 * confidence of the step that stopped it. */
typedef struct dfsel_dspark_outputs {
  int32_t n_blocks;     /* blocks each buffer holds: a run of more is refused */
  int32_t* tokens;      /* [n_blocks][N] drafted target ids */
  int32_t* n_emitted;   /* [n_blocks] */
  int32_t* draft_ids;   /* [n_blocks][N] the chosen draft ids (the tokens without d2t) */
  float* logits;        /* [n_blocks][N] l_k at the chosen id */
  float* probs;         /* [n_blocks][N] sampling: softmax(l_k / temperature) at the chosen id (greedy: 0) */
  float* log_norm;      /* [n_blocks][N] sampling: log sum_v exp(l_k[v] / temperature) (greedy: 0) */
  float* confidence;    /* [n_blocks][N] c_k; plans with a confidence head only */
} dfsel_dspark_outputs;

typedef struct dfsel_dspark_plan dfsel_dspark_plan;

/* Workspace a plan with this description needs (for desc->workspace), as dfsel_workspace_size:
 * SIZE_MAX when it would not fit in the address space (plan creation refuses that). */
DFSEL_API dfsel_status dfsel_dspark_workspace_size(const dfsel_dspark_plan_desc* desc, size_t* bytes,
                                                   char* msg, size_t msg_len);
/* Validates and sets up; NCCL plans agree with their peers as dfsel_plan_create's do. The CPU
 * backend widens K-quant weights and starts its worker threads here; W1, W2, the scale, the
 * confidence head and d2t are read in place at every run, must outlive the plan and must not
 * change while it lives. d2t is checked whole here; a run checks again the one entry each step
 * uses before it indexes W1 by it, and a changed entry out of range fails the run (every rank
 * of a group alike) with DFSEL_INVALID_ARGUMENT naming the draft id and the value. */
DFSEL_API dfsel_status dfsel_dspark_plan_create(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan** plan,
                                                char* msg, size_t msg_len);
/* DFSEL_BUSY, and nothing destroyed, while another thread's call holds the plan; NULL is
 * accepted and does nothing (DFSEL_SUCCESS: dfsel.h, NULL handles). */
DFSEL_API dfsel_status dfsel_dspark_plan_destroy(dfsel_dspark_plan* plan);
DFSEL_API dfsel_backend dfsel_dspark_plan_backend(const dfsel_dspark_plan* plan);
DFSEL_API const char* dfsel_dspark_plan_last_error(const dfsel_dspark_plan* plan);

/* One chain (N steps of every block) for a plan whose exchange needs no peers in this call. */
DFSEL_API dfsel_status dfsel_dspark_plan_run(dfsel_dspark_plan* plan, const dfsel_dspark_inputs* in,
                                             const dfsel_dspark_outputs* out, void* stream);
/* One chain for several ranks driven from this thread, as dfsel_run_group: the plans describe
 * one chain (config, placement and weight types, the types as given before creation widens
 * block types, the transform compared bit for bit: the rule the NCCL set-up applies), an
 * in-process group is whole and its ranges tile [0, V_draft), and temperature, p_min and seed
 * are the same in every inputs[i]. Every rank must be given the same anchors, hidden rows and
 * scalars and hold the same conf_w: the plans compare them at the first exchange (a digest in
 * the records) and fail every rank with DFSEL_INVALID_ARGUMENT when they differ (CPU plans in
 * this call; CUDA plans stop that block, which emits nothing, and every rank's wait reports
 * it, NCCL groups included). */
DFSEL_API dfsel_status dfsel_dspark_run_group(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                                              const dfsel_dspark_outputs* out, void* const* streams);
/* As dfsel_plan_wait; timeout_ms < 0 waits without a limit. */
DFSEL_API dfsel_status dfsel_dspark_plan_wait(dfsel_dspark_plan* plan, void* stream, int64_t timeout_ms);

/* GGUF: dfsel_gguf_open reads DSpark drafts too (a "dflash" draft with markov_w1.weight). */
typedef enum dfsel_draft_kind {
  DFSEL_DRAFT_DFLASH2 = 1, /* selector_* tensors: dfsel_gguf_config, dfsel_gguf_tensors */
  DFSEL_DRAFT_DSPARK = 2   /* markov_* tensors: dfsel_gguf_dspark_desc */
} dfsel_draft_kind;

DFSEL_API dfsel_status dfsel_gguf_draft_kind(const dfsel_gguf* gguf, dfsel_draft_kind* kind);

/* Fills desc->config (max_blocks 0, for the caller to set; logit_scale and softcap 0, as
 * llama.cpp runs DSpark drafts), desc->shard.v_begin / v_end (the range opened), placement
 * (replicated), w1 {R, V_target}, w2 and w2_scale (the rows of the range), conf_w, conf_bias
 * and d2t (the range's part). Views stay valid until dfsel_gguf_close; the other fields of
 * desc are left as they were. */
DFSEL_API dfsel_status dfsel_gguf_dspark_desc(const dfsel_gguf* gguf, dfsel_dspark_plan_desc* desc);

#ifdef __cplusplus
}
#endif

#endif /* DFSEL_DSPARK_H */
