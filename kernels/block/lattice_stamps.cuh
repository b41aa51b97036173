// Phase stamps of the lattice's fast instance, compiled in only where DFSEL_LATTICE_STAMPS is
// defined (the probe bench/probe/lattice_phases.cu, which builds its own copy of the kernels):
// thread 0 of each CTA adds the cycles from its entry to each stamp into
// g_lattice_stamps[its cluster rank][stamp]. In the library the stamps are empty statements.
#pragma once

#ifdef DFSEL_LATTICE_STAMPS
constexpr int kLatticeStamps = 8;
__device__ unsigned long long g_lattice_stamps[16][kLatticeStamps];
#define LATTICE_STAMPS_BEGIN const long long lattice_t0 = clock64()
#define LATTICE_STAMP(i, rank)                                                                \
  do {                                                                                       \
    if (threadIdx.x == 0 && (rank) < 16)                                                     \
      atomicAdd(&g_lattice_stamps[(rank)][(i)], (unsigned long long)(clock64() - lattice_t0)); \
  } while (0)
#else
#define LATTICE_STAMPS_BEGIN
#define LATTICE_STAMP(i, rank)
#endif
