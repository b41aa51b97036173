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
 * For ggml-cuda there is no graph node here: where one device holds the logits, an op of the
 * engine's passes its device tensors, converted by dfsel_ggml_tensor, to dfsel_plan_run on the
 * backend's stream; under split-mode tensor the engine calls dfsel_run_group over every device
 * between graph computes (ggml's meta backend refuses a node over vocabulary-split logits;
 * docs/ggml.md says what ggml keeps private).
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

#ifdef __cplusplus
}
#endif

#endif /* DFSEL_GGML_H */
