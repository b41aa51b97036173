/* dfsel::ggml: dfsel on real ggml tensors (docs/ggml.md).
 *
 * Built when CMake finds ggml (find_package(ggml CONFIG)); link dfsel::ggml. The header names
 * ggml's structs without including ggml.h, so it stays a C header for callers of either.
 *
 * - dfsel_ggml_tensor: the dfsel_tensor view of a `const struct ggml_tensor *`, refusing every
 *   type, shape or stride dfsel cannot read, with a message that names the tensor's `name`.
 * - dfsel_ggml_op + dfsel_ggml_select: the selector as a node of a ggml graph computed by
 *   ggml's CPU backend (ggml's custom-op mechanism, ggml_custom_4d). The node reads logits
 *   {V, n_tokens} and hidden {n_embd, n_tokens} (F32, F16 or BF16) and the anchors I32
 *   {n_blocks}, and yields llama.cpp's packed lattice F32 {n_embd, n_tokens} (SPEC section 6.5).
 *
 * Threads: ggml calls the node on each of its graph threads (ith of nth; the node's n_tasks,
 * the op's thread count P = desc.n_threads or every core for 0, does not bound nth in ggml's
 * CPU backend). The first W = min(nth, P) threads each run their own single-threaded plan on
 * the blocks [n_blocks * ith / W, n_blocks * (ith + 1) / W); the others return at once. No
 * thread is started and none waits on another inside the node, so the node cannot deadlock
 * or put more threads on the cores than ggml did. Blocks are independent, so the rows are
 * bitwise those of one plan over every block.
 *
 * - dfsel_ggml_run / dfsel_ggml_run_group: a step of CUDA (or CPU) plans on tensors that ggml
 *   computed, between graph computes: the draft graph's t_logits (or each device's slice of
 *   it) and t_embd read in place, the packed rows written into a tensor of the engine's graph
 *   buffers (llama.cpp's t_h_nextn), the drafted path into another. Every tensor is checked
 *   first: its layout, and that its memory is what the plan reads (a ggml-cuda buffer of the
 *   plan's GPU for a CUDA plan); anything else is refused with its name, nothing enqueued.
 *   ggml_backend_graph_compute returns once its backend's private stream is done, so the run
 *   needs no other synchronisation before it; the engine waits for the run (dfsel_plan_check on
 *   the same stream) before a graph overwrites the tensors it reads or the host reads the path.
 *   Under split-mode tensor, one dfsel_ggml_run_group over every device (docs/ggml.md).
 */
#ifndef DFSEL_GGML_H
#define DFSEL_GGML_H

#include <dfsel/dfsel.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ggml_tensor;
struct ggml_context;

/* The view of t: data, type, ne and nb as they are. DFSEL_UNSUPPORTED for a ggml type that
 * dfsel does not read (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K; not the IQ, TQ or MXFP4 types); DFSEL_INVALID_ARGUMENT for
 * a tensor of more than two dimensions, rows not contiguous along ne[0] (a transposed or
 * permuted view), ne[0] not a whole number of blocks, rows closer than one row or not a
 * multiple of the element, data NULL (not allocated yet) or misaligned. msg (may be NULL)
 * receives the reason, naming t->name. */
DFSEL_API dfsel_status dfsel_ggml_tensor(const struct ggml_tensor* t, dfsel_tensor* out, char* msg,
                                         size_t msg_len);

typedef struct dfsel_ggml_op dfsel_ggml_op;

/* An op for graphs of one selector: desc as for dfsel_plan_create, with the CPU backend (or
 * AUTO), one shard (n_ranks 1, the whole vocabulary) and no caller workspace; the weights may
 * come from dfsel_ggml_tensor. desc->n_threads is the most ggml threads one node uses (0:
 * every core); each gets its own plan, all sharing the weights (the block types but Q8_0 are
 * widened to BF16 once, here, by ggml's decoder: bitwise what a plan widens them to). The weights must outlive the op; the op must outlive the graphs using it,
 * and one graph at a time may compute its nodes (the plans keep their workspace in the op). */
DFSEL_API dfsel_status dfsel_ggml_op_create(const dfsel_plan_desc* desc, dfsel_ggml_op** op,
                                            char* msg, size_t msg_len);
DFSEL_API dfsel_status dfsel_ggml_op_destroy(dfsel_ggml_op* op);

/* Adds the selector node to ctx: *out is an F32 tensor {n_embd, n_tokens} whose rows are the
 * packed lattice once the graph is computed. logits {V, n_tokens} and hidden
 * {n_embd, n_tokens} are F32, F16 or BF16, rows contiguous, padded nb[1] allowed; anchors is
 * I32 {n_blocks}, n_tokens = n_blocks * block_size, 1 <= n_blocks <= max_blocks. Data need
 * not be allocated yet (a graph allocator may place it later). A mismatch is a status with a
 * message naming the tensor (also kept for dfsel_ggml_op_last_error); *out is then NULL. */
DFSEL_API dfsel_status dfsel_ggml_select(struct ggml_context* ctx, dfsel_ggml_op* op,
                                         struct ggml_tensor* logits, struct ggml_tensor* hidden,
                                         struct ggml_tensor* anchors, struct ggml_tensor** out);

/* A node has no status to return to ggml: a failure inside it (a tensor that the allocator
 * left without data, a device-side anchor id out of range) fills that node's rows with NaN
 * and is kept here. Returns the first failure since the last call (and forgets it), or
 * DFSEL_SUCCESS; call it after ggml_graph_compute. */
DFSEL_API dfsel_status dfsel_ggml_op_check(dfsel_ggml_op* op);
/* The message of the op's last failure ("" if none). */
DFSEL_API const char* dfsel_ggml_op_last_error(const dfsel_ggml_op* op);

/* One step's tensors of one device (a rank of the plan's group). n_tokens = n_blocks *
 * block_size, with n_blocks = anchors->ne[0]. Rows past n_tokens (ne[1] larger) are not read or
 * written. */
typedef struct dfsel_ggml_step {
  const struct ggml_tensor* logits;  /* {v_end - v_begin, >= n_tokens}, F32 / F16 / BF16: t_logits or
                                        the device's vocabulary slice of it */
  const struct ggml_tensor* hidden;  /* {n_embd, >= n_tokens}, F32 / F16 / BF16: t_embd */
  const struct ggml_tensor* anchors; /* I32 {n_blocks}: each block's last committed token */
  struct ggml_tensor* packed;        /* F32 {n_embd, >= n_tokens}: llama.cpp's packed lattice rows,
                                        or NULL (not written) */
  struct ggml_tensor* path;          /* I32 {block_size - 1, >= n_blocks}, rows contiguous: the drafted
                                        tokens of dfsel's walk, -1 after the last emitted */
  struct ggml_tensor* n_emitted;     /* I32 {>= n_blocks} */
  float temperature;                 /* as dfsel_inputs: <= 0 greedy */
  float p_min;
  uint64_t seed;
} dfsel_ggml_step;

/* dfsel_run_group over n plans (one per device of the group, see dfsel.h) on ggml tensors:
 * steps[i] and streams[i] are plans[i]'s. Each tensor is converted as dfsel_ggml_tensor does
 * and refused (DFSEL_INVALID_ARGUMENT, its name and the reason in msg) when its shape is not
 * the step's or its memory is not what plans[i] reads: a CUDA plan refuses tensors of a host
 * buffer (ggml's CPU buffers, pinned host buffers), of a GPU other than its own, and data
 * without a buffer that is not device memory of its GPU; a CPU plan refuses device memory. A
 * refusal enqueues nothing; otherwise the status is dfsel_run_group's and msg its message.
 * msg may be NULL. Only enqueues work on the streams, like dfsel_run_group, so a CUDA graph
 * can capture it. */
DFSEL_API dfsel_status dfsel_ggml_run_group(int n, dfsel_plan* const* plans, const dfsel_ggml_step* steps,
                                            void* const* streams, char* msg, size_t msg_len);
/* The same for one plan (one shard, or an NCCL communicator): dfsel_plan_run on ggml tensors. */
DFSEL_API dfsel_status dfsel_ggml_run(dfsel_plan* plan, const dfsel_ggml_step* step, void* stream, char* msg,
                                      size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif /* DFSEL_GGML_H */
