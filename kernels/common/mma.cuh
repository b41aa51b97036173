// Tensor-core instructions shared by the kernels that multiply on them (the gate, the DSpark
// pass): BF16 mma.sync with F32 accumulators.
#pragma once

#include <stdint.h>

namespace dfsel::cuda {

// c += a * b for one 16 x 8 x 16 tile (PTX ISA, mma.m16n8k16 fragments): a0 = rows g, k 2t
// and 2t + 1; a1 = rows g + 8, same k; a2, a3 = the same at k + 8; b0 = k 2t, 2t + 1 of column
// g; b1 = k + 8; c0, c1 = row g, columns 2t, 2t + 1; c2, c3 = row g + 8 (g = lane / 4,
// t = lane % 4).
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace dfsel::cuda
