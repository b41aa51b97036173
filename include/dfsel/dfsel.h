/* dfsel: the DFlash2 candidate selector on a vocabulary split across GPUs.
 *
 * The whole public C ABI. Every call returns a dfsel_status; failures carry a message that
 * names the argument and its value (dfsel_plan_last_error, or the msg buffer of create).
 * The library keeps no global state but the addresses of its live plans (Handles, below),
 * never prints, never exits.
 *
 * Shapes follow ggml: ne[0] is the contiguous axis, nb[] are strides in bytes.
 *   logits  {V_shard, n_tokens}     hidden  {n_embd, n_tokens}
 *   e_prev  {R, V or V_shard}       e_next  {R, V or V_shard}      w_h {n_embd, R}
 * n_tokens = n_blocks * block_size; row 0 of every block is the anchor position and is not
 * read. Native outputs are indexed by drafted row d = b * L + (p - 1), L = block_size - 1.
 * Q8_0 tensors need ne[0] % 32 == 0. The other block types (weights only, widened to BF16 at
 * plan creation) need ne[0] a multiple of their block: 32 for Q4_0, Q4_1, Q5_0, Q5_1, 256 for
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Rows are nb[1] bytes apart, a multiple of the element size.
 *
 * In-process groups (several plans, no NCCL communicator, dfsel_run_group): the next run of
 * the group must be ordered after this one on every plan's stream (one stream for all, or a
 * synchronisation between steps).
 *
 * Memory that a run writes may not be shared: a plan's outputs overlap neither each other nor
 * anything that plan reads (inputs.logits, inputs.hidden, inputs.anchors, its e_prev, e_next
 * and w_h, its caller-owned workspace); a run whose outputs do is refused
 * (DFSEL_INVALID_ARGUMENT, both buffers named) before anything is written. In a group call
 * (dfsel_run_group) the same holds across plans: no plan's outputs overlap another plan's
 * outputs or anything it reads (refused the same way, both plans named). The packed rows
 * cannot replace the hidden states in place. Inputs may overlap each other freely (the shards
 * of an in-process group may read one logits buffer). The byte ranges compared are those the
 * run touches: e.g. [cand_ids, cand_ids + n_blocks * L * K * 4), for a matrix its ne[1] - 1
 * strides and one row, outputs.q only when sampling.
 *
 * What the library cannot see, the C caller guarantees: every non-NULL output points to at
 * least the bytes dfsel_outputs lists for the run's n_blocks (a run of n_blocks <= max_blocks
 * writes exactly those, from the start of each buffer), and a tensor's data holds the
 * (ne[1] - 1) * nb[1] bytes plus one row that its view describes. What it can see it checks
 * before anything is read or written: shapes and strides against the plan, every pointer
 * aligned for the type it holds (4 bytes for int32 and float, 2 for F16, BF16 and quantised
 * rows), required pointers not NULL, and the overlaps above. A caller-owned workspace is
 * memory the plan writes: plan creation refuses one that overlaps e_prev, e_next or w_h, and
 * a run refuses one that overlaps its inputs or outputs.
 *
 * Strides and sizes are unsigned byte counts, under one rule (a tensor's nb[1],
 * outputs.packed_row_stride, workspace_bytes): the bytes they span, e.g. (ne[1] - 1) * nb[1]
 * plus one row, may not exceed 2^47 (what a process can address) nor run past the end of the
 * address space. A stride of (size_t)-row (rows in reverse order) or one near SIZE_MAX is
 * refused (DFSEL_INVALID_ARGUMENT, the field and its value named), never wrapped.
 *
 * Threads: a plan serves one call at a time. dfsel_plan_run, dfsel_run_group, dfsel_plan_check
 * and dfsel_plan_wait claim every plan they name for their whole length; a call that names a
 * plan another thread's call holds is refused with DFSEL_BUSY at once (nothing is read or
 * written, no message is recorded, the other call goes on undisturbed). dfsel_plan_destroy of
 * a plan in use returns DFSEL_BUSY and frees nothing. Different plans may run on different
 * threads at the same time. dfsel_plan_last_error belongs to the thread whose call on the plan
 * finished last: read it before the next call on that plan. A caller-owned workspace must not
 * be shared by plans that may run at the same time (the library cannot see that).
 *
 * NULL handles: the calls that free a handle (dfsel_plan_destroy, dfsel_dspark_plan_destroy,
 * dfsel_gguf_close) accept NULL and do nothing, returning DFSEL_SUCCESS, as free() does; the
 * other calls that return a status refuse a NULL handle with DFSEL_INVALID_ARGUMENT.
 *
 * Handles: every call looks its plans up among the plans alive in this process (the one piece
 * of process-wide state the library keeps, addresses only), so a plan already destroyed, or a
 * dfsel_dspark_plan given to a dfsel_plan call (and the reverse), is refused with
 * DFSEL_INVALID_ARGUMENT without being read; dfsel_plan_last_error then says what the handle is
 * and dfsel_plan_backend answers AUTO. What cannot be told: a destroyed plan's address that a
 * new plan of the same kind has since been given (the call goes to the new plan).
 *
 * fork(): a child process inherits its parent's plans but none of their worker threads. In
 * the child a CPU plan runs on the calling thread alone (the same results: they never depend on
 * the thread count) and dfsel_plan_destroy returns, leaving the workers' bookkeeping (a few
 * hundred bytes) unfreed; a plan that a call of another parent thread held at the fork stays
 * held in the child (DFSEL_BUSY). The parent's plans are unaffected. A CUDA plan cannot run in
 * a child (CUDA itself does not survive fork); create plans for the child in the child.
 *
 * The CPU backend copies W_h when the plan is created (it is the plan's weight, widened to
 * floats once); the codebooks are read in place at every run and must outlive the plan.
 */
#ifndef DFSEL_DFSEL_H
#define DFSEL_DFSEL_H

#include <stddef.h>
#include <stdint.h>

#define DFSEL_VERSION_MAJOR 0
#define DFSEL_VERSION_MINOR 2
#define DFSEL_VERSION_PATCH 0
#define DFSEL_VERSION (DFSEL_VERSION_MAJOR * 10000 + DFSEL_VERSION_MINOR * 100 + DFSEL_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define DFSEL_API __declspec(dllexport)
#else
#define DFSEL_API __attribute__((visibility("default")))
#endif

typedef enum dfsel_status {
  DFSEL_SUCCESS = 0,
  DFSEL_INVALID_ARGUMENT = 1, /* a null pointer, a bad shape, a bad value */
  DFSEL_UNSUPPORTED = 2,      /* a type or feature this build or backend does not have */
  DFSEL_OUT_OF_MEMORY = 3,
  DFSEL_CUDA_ERROR = 4,
  DFSEL_NCCL_ERROR = 5,
  DFSEL_IO_ERROR = 6,     /* a file could not be opened or mapped */
  DFSEL_FORMAT_ERROR = 7, /* a malformed file */
  DFSEL_NO_DEVICE = 8,    /* the CUDA backend was asked for and no GPU is present */
  DFSEL_INTERNAL_ERROR = 9,
  DFSEL_TIMEOUT = 10,     /* dfsel_plan_wait: the run had not completed when the time ran out */
  DFSEL_BUSY = 11         /* another call is using the plan at this moment (see Threads above) */
} dfsel_status;

/* Element types; the numbers are ggml's type ids. ggml's other types (IQ*, TQ*, MXFP4, Q8_1,
 * Q8_K, ...) are refused (DFSEL_UNSUPPORTED, the type and the types read named). */
typedef enum dfsel_type {
  DFSEL_TYPE_F32 = 0,
  DFSEL_TYPE_F16 = 1,
  DFSEL_TYPE_Q4_0 = 2,
  DFSEL_TYPE_Q4_1 = 3,
  DFSEL_TYPE_Q5_0 = 6,
  DFSEL_TYPE_Q5_1 = 7,
  DFSEL_TYPE_Q8_0 = 8,
  DFSEL_TYPE_Q2_K = 10,
  DFSEL_TYPE_Q3_K = 11,
  DFSEL_TYPE_Q4_K = 12,
  DFSEL_TYPE_Q5_K = 13,
  DFSEL_TYPE_Q6_K = 14,
  DFSEL_TYPE_BF16 = 30
} dfsel_type;

typedef enum dfsel_backend {
  DFSEL_BACKEND_AUTO = 0, /* CUDA when built with it and a GPU is present, else CPU */
  DFSEL_BACKEND_CPU = 1,
  DFSEL_BACKEND_CUDA = 2
} dfsel_backend;

typedef enum dfsel_placement {
  DFSEL_CODEBOOKS_REPLICATED = 0, /* every rank holds e_prev/e_next for all of [0, V) */
  DFSEL_CODEBOOKS_SHARDED = 1     /* each rank holds the rows of its own vocabulary range */
} dfsel_placement;

/* A ggml-style tensor view. Memory is host memory for the CPU backend, device memory for CUDA
 * (a CUDA plan's weights and workspace may also be host memory CUDA allocated or registered;
 * plan creation refuses pageable host memory and another device's memory, the pointer named). */
typedef struct dfsel_tensor {
  const void* data;
  dfsel_type type;
  int64_t ne[4];
  size_t nb[4];
} dfsel_tensor;

typedef struct dfsel_config {
  int64_t n_vocab;     /* V */
  int64_t n_embd;      /* width of the hidden states (and of llama.cpp's packed rows) */
  int32_t codebook_rank; /* R, the rank of the codebooks and the gate (not a shard index) */
  int32_t top_k;       /* K */
  int32_t block_size;  /* anchor + L drafted positions */
  float logit_scale;   /* m > 0; 0 means 1 */
  float softcap;       /* c; <= 0 disables */
  int32_t max_blocks;  /* capacity: the most blocks one run may carry; max_blocks * (block_size - 1)
                          and n_embd must stay below 2^31 */
} dfsel_config;

typedef struct dfsel_shard {
  int32_t rank;    /* this shard's index, 0..n_ranks-1 */
  int32_t n_ranks; /* S */
  int64_t v_begin; /* this shard owns token ids [v_begin, v_end) */
  int64_t v_end;
} dfsel_shard;

typedef struct dfsel_plan_desc {
  dfsel_config config;
  dfsel_shard shard;
  dfsel_backend backend;
  int32_t device;            /* CUDA device ordinal (CUDA backend) */
  dfsel_placement placement;
  dfsel_tensor e_prev;       /* {R, V} replicated, {R, v_end - v_begin} sharded */
  dfsel_tensor e_next;       /* as e_prev: the same type and the same nb[1] (a token's rows of both
                                codebooks are read with one row stride) */
  dfsel_tensor w_h;          /* {n_embd, R}, replicated */
  void* nccl_comm;           /* an ncclComm_t owned by the caller, or NULL (in-process exchange) */
  void* workspace;           /* optional caller-owned workspace (dfsel_workspace_size), aligned to
                                256 bytes for CUDA, 16 for the CPU; NULL: the plan allocates it */
  size_t workspace_bytes;
  int32_t n_threads;         /* CPU backend: threads a run uses, the caller's included; 0 means every
                                core this process may run on; at most 1024. Started at plan creation,
                                joined by dfsel_plan_destroy; a run starts none. Results do not depend
                                on it (bitwise). Ignored by the CUDA backend. */
} dfsel_plan_desc;

typedef struct dfsel_inputs {
  dfsel_tensor logits;     /* {v_end - v_begin, n_blocks * block_size}: F32, F16 or BF16 */
  dfsel_tensor hidden;     /* {n_embd, n_blocks * block_size}: F32, F16 or BF16 */
  const int32_t* anchors;  /* [n_blocks], same memory space as the tensors */
  int32_t n_blocks;
  float temperature;       /* <= 0: greedy walk; > 0: sampling walk */
  float p_min;             /* 0 disables the cut */
  uint64_t seed;           /* sampling: draws keyed by (seed, block, position) */
} dfsel_inputs;

/* Every pointer is optional (NULL: not written) except path and n_emitted. */
typedef struct dfsel_outputs {
  int32_t* cand_ids;   /* [n_blocks * L][K] global token ids */
  float* unary;        /* [n_blocks * L][K] transformed logits */
  float* scores;       /* [n_blocks * L][K][K]; at p = 1 every predecessor row repeats the anchor's */
  float* q;            /* [n_blocks * L][K] sampling distribution used at each step; written only
                          when sampling (temperature > 0), zeros after a stop */
  int32_t* path;       /* [n_blocks][L] drafted tokens, -1 after the last emitted one */
  int32_t* n_emitted;  /* [n_blocks] */
  float* packed;       /* llama.cpp packed lattice rows: n_blocks * block_size rows of n_embd floats */
  size_t packed_row_stride; /* bytes between packed rows; 0 means n_embd * 4; a multiple of 4, at
                               least n_embd * 4, spanning at most 2^47 bytes (the rule above) */
} dfsel_outputs;

typedef struct dfsel_plan dfsel_plan;

DFSEL_API const char* dfsel_status_string(dfsel_status status);
DFSEL_API const char* dfsel_type_name(dfsel_type type);
DFSEL_API int dfsel_version(void);

/* A 2-D ggml-style view {ne0, ne1} of `type` with rows nb1 bytes apart: nb[0] is the type's
 * element (block) size, ne[2] = ne[3] = 1. A convenience for callers without ggml tensors. */
DFSEL_API dfsel_tensor dfsel_tensor_2d(const void* data, dfsel_type type, int64_t ne0, int64_t ne1,
                                       size_t nb1);

/* Whether this build has the CUDA backend and how many GPUs it sees (0 without CUDA). */
DFSEL_API dfsel_status dfsel_cuda_device_count(int* count);

/* Workspace a plan with this description needs (for desc->workspace); SIZE_MAX when it would
 * not fit in the address space (plan creation refuses that). */
DFSEL_API dfsel_status dfsel_workspace_size(const dfsel_plan_desc* desc, size_t* bytes,
                                            char* msg, size_t msg_len);

/* Validates and sets up. msg (may be NULL) receives the reason of a failure. */
DFSEL_API dfsel_status dfsel_plan_create(const dfsel_plan_desc* desc, dfsel_plan** plan,
                                         char* msg, size_t msg_len);
DFSEL_API dfsel_status dfsel_plan_destroy(dfsel_plan* plan);
DFSEL_API dfsel_backend dfsel_plan_backend(const dfsel_plan* plan);
/* The config the plan was created with, as it was given (DFSEL_INVALID_ARGUMENT for a handle that is
 * not a live plan). */
DFSEL_API dfsel_status dfsel_plan_config(const dfsel_plan* plan, dfsel_config* config);
/* Whether a run of the plan can read memory at data: a CUDA plan reads memory of its device
 * (or host memory CUDA allocated or registered), a CPU plan memory of the host. A run does not
 * ask the driver where each pointer lives (a call per pointer and step); callers whose
 * tensors come from elsewhere (dfsel::ggml's ggml tensors) check them with this first.
 * DFSEL_INVALID_ARGUMENT, with msg naming `what` (may be NULL) and the memory found: another
 * device's memory, pageable host memory for a CUDA plan, device memory for a CPU plan. */
DFSEL_API dfsel_status dfsel_plan_check_memory(const dfsel_plan* plan, const void* data, const char* what,
                                               char* msg, size_t msg_len);
/* The outcome of the plan's last call that named it (run, run_group, wait, check): the
 * message of its failure, "" after a success. A call that names no plan (dfsel_run_group with
 * n <= 0 or plans == NULL) cannot record anything without global state: its status is the
 * whole answer, and every plan keeps what it held. */
DFSEL_API const char* dfsel_plan_last_error(const dfsel_plan* plan);

/* One selector step for a plan whose exchange needs no peers in this call: n_ranks == 1 or an
 * NCCL communicator. CUDA: stream is a cudaStream_t; the call only enqueues work. */
DFSEL_API dfsel_status dfsel_plan_run(dfsel_plan* plan, const dfsel_inputs* in,
                                      const dfsel_outputs* out, void* stream);

/* One step for several shards driven from this thread: every rank of one group (in-process
 * exchange), or this process's ranks of an NCCL group (the all-gathers are grouped). The
 * plans must describe one selector: the same config (logit_scale and softcap compared bit
 * for bit), placement, codebook type and W_h type (the types as given: Q4_K codebooks beside
 * BF16 ones are another selector, though creation widens them to BF16), by the rule the NCCL
 * set-up applies; an in-process group also needs every rank once and ranges that tile [0, V). Every rank must be given the same anchors, hidden rows,
 * temperature, p_min and seed (each its own slice of the logits) and hold the same W_h: ranks
 * that differ would each draft their own tokens. An in-process group of CPU plans checks this
 * before anything runs and refuses a difference with DFSEL_INVALID_ARGUMENT, naming the first
 * one and its rank: anchors by value, the hidden rows a run reads (not the anchor positions')
 * by type and bytes, the scalars bit for bit (-0 is not 0), W_h by a digest of its bytes taken
 * at plan creation. CUDA plans (in process or with an NCCL communicator) compare the same
 * through their records: each rank sends its anchors and digests of the scalars, of the hidden
 * rows it reads and of W_h (taken at plan creation); a block whose ranks differ walks nothing
 * (path -1, n_emitted 0) on every rank, and every rank's dfsel_plan_check / dfsel_plan_wait
 * returns DFSEL_INVALID_ARGUMENT naming the first difference and its rank. The codebooks are
 * not compared (every rank holds its own rows, or in the replicated placement all V of them,
 * too many to read per call). The outcome is recorded in every plan given (n >= 1 and plans not
 * NULL); DFSEL_INVALID_ARGUMENT with n <= 0 or plans == NULL is recorded in none. */
DFSEL_API dfsel_status dfsel_run_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in,
                                       const dfsel_outputs* out, void* const* streams);

/* Waits for the plan's last run and reports errors found on the device (anchor ids out of
 * range). A run never blocks the host; this call does. The same as dfsel_plan_wait with no
 * time limit. A stream that is capturing a CUDA graph is refused (DFSEL_INVALID_ARGUMENT, the
 * capture left intact): check after launching the graph. */
DFSEL_API dfsel_status dfsel_plan_check(dfsel_plan* plan, void* stream);

/* dfsel_plan_check with a limit: waits at most timeout_ms milliseconds (< 0: no limit).
 * While it waits it polls the plan's NCCL communicator, so an asynchronous NCCL error (a peer
 * the transport saw fail) returns DFSEL_NCCL_ERROR rather than waiting forever. DFSEL_TIMEOUT
 * leaves the run in flight; when a peer is gone for good, the rank aborts its communicator
 * (ncclCommAbort ends the run) and destroys the plan. Once its communicator is aborted or
 * destroyed, a plan accepts only dfsel_plan_destroy; new plans on a new communicator work. */
DFSEL_API dfsel_status dfsel_plan_wait(dfsel_plan* plan, void* stream, int64_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* DFSEL_DFSEL_H */
