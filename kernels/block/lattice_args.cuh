// What a lattice CTA is given (score_lattice.cu): the arguments of one launch and the carve of
// its dynamic shared memory, plain data that plan creation fills on the host and the CTA's
// phases (kernels/block/lattice_*.cuh) read on the device. The launcher's interface,
// kernels/score_lattice.cuh, passes them on.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/row_source.cuh"
#include "kernels/common/selector_math.cuh"
#include "kernels/common/walk.cuh"

namespace dfsel::cuda {

struct LatticeArgs {
  RowSource rows;  // the records of every rank and, replicated, the local codebooks
  int32_t k;
  int32_t R;
  int32_t block_size;
  int32_t n_blocks;
  dfsel_type cb_type;
  Transform transform;
  const int32_t* anchors;  // [n_blocks]
  const float* g;          // [n_blocks * L][R] from gate
  WalkParams walk;
  // Outputs (any may be null except path, n_emitted).
  int32_t* cand_ids;
  float* unary;
  float* scores;
  float* q;                  // written when sampling
  int32_t* path;
  int32_t* n_emitted;
  float* packed;
  size_t packed_row_stride;  // bytes, resolved (packed_stride)
  int64_t n_embd;            // floats per packed row
  // Workspace, used only where the walker's tables do not fit its shared memory.
  float* lattice;           // [n_blocks * L][K][K]
  int2* choices;            // [n_blocks * L][K]: the walk's choice from each lattice row (with
                            // the kWalkStop flag) and the token id it emits
  int32_t* error;           // [0]: 1 + a block whose anchor is out of range; [1] (layout with an
                            // agree section): 1 + the lowest block whose ranks' records say
                            // they were given different inputs. Never cleared here
  int32_t* host_flag;       // page-locked host word set to 1 whenever `error` is set (NULL: none),
                            // so that the wait finds a clean run without copying `error` back
};

// Shared memory carve of one CTA; offsets in bytes.
struct LatticeSmem {
  int spec;          // every record's rows copied whole as its record lands; else the merged rows
  int bulk;          // rows copied by cp.async.bulk; else by the threads, `unit` bytes a load
  int unit;
  int copy_bytes;    // bytes copied for a whole row: the row (replicated), its padded slot (sharded)
  int rc;            // elements of R staged per pass: R rounded up to 16, or a multiple of 16
                     // (of 256 for Q8_0) whose rows fit the slots
  int pitch;         // bytes between staged rows (conflict-free tensor-core fragments)
  int n_slots;
  int L;
  int push_choices;  // the CTAs push the walk's choices into the walker's shared memory
  int push_q;        // ... and their q rows; else the walker reads the lattice rows back
  int walk_chunk;    // positions of the global choices staged at once (push_choices == 0)
  size_t slots_off, gs_off, recs_off, keys_off, flags_off, cand_off, src_off, rowp_off, ok_off, u_off, red_off, fin_off,
      table_off, qtab_off, used_off, bar_off, bytes;
};

}  // namespace dfsel::cuda
