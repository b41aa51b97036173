/* dfsel GGUF loader: the selector of a DFlash2 draft stored as GGUF (versions 2 and 3).
 *
 * A draft has general.architecture "dflash", the metadata dflash.selector_rank (R),
 * dflash.selector_top_k (K), dflash.block_size, dflash.embedding_length (n_embd), optionally
 * dflash.logit_scale and dflash.final_logit_softcapping, and the tensors
 * selector_predecessor.weight and selector_successor.weight {R, V} and selector_hidden.weight
 * {n_embd, R}. The file is memory-mapped read-only. F32, F16, BF16 and Q8_0 tensors are views
 * into the mapping; Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K are dequantised to
 * BF16 at open (other types, the IQ and TQ ones among them, are refused: DFSEL_UNSUPPORTED
 * naming the tensor, its type and the types read). Views stay valid until
 * dfsel_gguf_close.
 *
 * The mapping and a file that shrinks: if the file is truncated (or rewritten shorter) while a
 * handle from dfsel_gguf_open is open, reading a view, or a metadata value, past the new end
 * raises SIGBUS, which ends the process unless the caller handles it; the library cannot turn
 * it into a status. A caller that cannot rule that out opens the draft with
 * dfsel_gguf_open_copy, which copies the selector tensors and the metadata into memory the
 * handle owns and lets the mapping go before it returns; the file is not read after that.
 * Only a file path that names a regular file is opened: a FIFO, a directory or a device is
 * refused (DFSEL_IO_ERROR) before it is opened, so a FIFO cannot block the call.
 *
 * Messages quote the file's bytes (keys, names, strings) escaped: control bytes, C1 controls
 * and bytes that are not UTF-8 are written as \xNN, so a message is printable UTF-8.
 * dfsel_gguf_metadata_key returns the key as stored: escape it before printing it.
 *
 * Every call returns a dfsel_status. dfsel_gguf_open writes the reason of a failure to msg;
 * the other calls keep it for dfsel_gguf_last_error (a NULL handle has nowhere to keep it).
 * A file that is not a well-formed GGUF, or not a consistent DFlash2 draft, is
 * DFSEL_FORMAT_ERROR; an unknown GGUF version or a selector tensor of a type dfsel does not
 * read is DFSEL_UNSUPPORTED; a file that cannot be opened or mapped is DFSEL_IO_ERROR.
 */
#ifndef DFSEL_GGUF_H
#define DFSEL_GGUF_H

#include <dfsel/dfsel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dfsel_gguf dfsel_gguf;

/* GGUF metadata value types; the numbers are the file's. */
typedef enum dfsel_gguf_value_type {
  DFSEL_GGUF_UINT8 = 0,
  DFSEL_GGUF_INT8 = 1,
  DFSEL_GGUF_UINT16 = 2,
  DFSEL_GGUF_INT16 = 3,
  DFSEL_GGUF_UINT32 = 4,
  DFSEL_GGUF_INT32 = 5,
  DFSEL_GGUF_FLOAT32 = 6,
  DFSEL_GGUF_BOOL = 7,
  DFSEL_GGUF_STRING = 8,
  DFSEL_GGUF_ARRAY = 9,
  DFSEL_GGUF_UINT64 = 10,
  DFSEL_GGUF_INT64 = 11,
  DFSEL_GGUF_FLOAT64 = 12
} dfsel_gguf_value_type;

typedef struct dfsel_gguf_kv_type {
  dfsel_gguf_value_type type;
  dfsel_gguf_value_type elem_type; /* arrays: the element type; otherwise == type */
  uint64_t n_elems;                /* arrays: the number of elements; otherwise 1 */
} dfsel_gguf_kv_type;

typedef struct dfsel_gguf_tensor_desc {
  const char* name;      /* owned by the handle */
  int32_t ggml_type;     /* ggml type id (dfsel_type for the types dfsel computes with) */
  const char* type_name; /* ggml's name: "f32", "q4_K", ... */
  int32_t n_dims;
  int64_t ne[4];        /* dims past n_dims are 1 */
  uint64_t file_offset; /* absolute byte offset of the data in the file */
  uint64_t n_bytes;
} dfsel_gguf_tensor_desc;

/* Opens a draft and loads the codebook rows [v_begin, v_end) (a vocabulary shard); -1, -1
 * loads all V rows. msg (may be NULL) receives the reason of a failure. */
DFSEL_API dfsel_status dfsel_gguf_open(const char* path, int64_t v_begin, int64_t v_end,
                                       dfsel_gguf** out, char* msg, size_t msg_len);
/* dfsel_gguf_open, then the selector tensors (rows [v_begin, v_end) of the codebooks, and W_h)
 * and the metadata are copied into memory the handle owns and the file is unmapped: a file
 * truncated after this call returns cannot raise SIGBUS in the caller. Costs the copy (about
 * 2 x V x R x 2 bytes for BF16 codebooks). The file must not shrink while the call runs. */
DFSEL_API dfsel_status dfsel_gguf_open_copy(const char* path, int64_t v_begin, int64_t v_end,
                                            dfsel_gguf** out, char* msg, size_t msg_len);
/* Frees the handle; its views are invalid from then on. NULL is accepted and does nothing
 * (DFSEL_SUCCESS), as the plan destroys accept it (dfsel.h, NULL handles). */
DFSEL_API dfsel_status dfsel_gguf_close(dfsel_gguf* gguf);
/* The message of the handle's last failed call ("" if none). */
DFSEL_API const char* dfsel_gguf_last_error(const dfsel_gguf* gguf);

/* n_vocab (the whole V, also for a shard), n_embd, codebook_rank, top_k, block_size, logit_scale (1 when
 * absent), softcap (0 when absent); max_blocks is 0, for the caller to set. */
DFSEL_API dfsel_status dfsel_gguf_config(const dfsel_gguf* gguf, dfsel_config* cfg);
/* Host views: e_prev, e_next {R, v_end - v_begin} (row v - v_begin is token v), w_h {n_embd, R}. */
DFSEL_API dfsel_status dfsel_gguf_tensors(const dfsel_gguf* gguf, dfsel_tensor* e_prev,
                                          dfsel_tensor* e_next, dfsel_tensor* w_h);
/* The loaded vocabulary range. */
DFSEL_API dfsel_status dfsel_gguf_shard(const dfsel_gguf* gguf, int64_t* v_begin, int64_t* v_end);
DFSEL_API dfsel_status dfsel_gguf_version(const dfsel_gguf* gguf, uint32_t* version);

/* Metadata in file order, i in [0, count). Keys and names stay owned by the handle. */
DFSEL_API dfsel_status dfsel_gguf_metadata_count(const dfsel_gguf* gguf, int64_t* count);
DFSEL_API dfsel_status dfsel_gguf_metadata_key(const dfsel_gguf* gguf, int64_t i, const char** key);
DFSEL_API dfsel_status dfsel_gguf_metadata_type(const dfsel_gguf* gguf, int64_t i,
                                                dfsel_gguf_kv_type* type);
/* A short rendering of value i (numbers, quoted strings, the first elements of arrays), cut to
 * fit len bytes including the terminating NUL; len must be at least 1. */
DFSEL_API dfsel_status dfsel_gguf_metadata_value_string(const dfsel_gguf* gguf, int64_t i,
                                                        char* buf, size_t len);
/* "u8" ... "f64", "array"; NULL for an id that is not a GGUF value type. */
DFSEL_API const char* dfsel_gguf_value_type_name(dfsel_gguf_value_type type);

/* Every tensor of the file, in file order, i in [0, count). */
DFSEL_API dfsel_status dfsel_gguf_tensor_count(const dfsel_gguf* gguf, int64_t* count);
DFSEL_API dfsel_status dfsel_gguf_tensor_info(const dfsel_gguf* gguf, int64_t i,
                                              dfsel_gguf_tensor_desc* info);

#ifdef __cplusplus
}
#endif

#endif /* DFSEL_GGUF_H */
