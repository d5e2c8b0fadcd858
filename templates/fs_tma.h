/*
** fs_tma.h: mbarrier and TMA (cp.async.bulk.tensor) wrappers for the Hopper
** templates (fsamp_ws.cu, fsamp_wg.cu); include after fs_device.h.
**
** Contracts: a "full" barrier is armed by one producer thread with the
** stage's byte count (mbar_expect_tx) and completes when every box copied
** with it has landed; waits are by phase parity.  Tensor maps are encoded by
** the host (runtime/sample.c) and passed as __grid_constant__ parameters.
*/
#ifndef FS_TMA_H
#define FS_TMA_H

__device__ __forceinline__ void mbar_init(unsigned long long *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/* Waits until the phase of parity `parity` of *bar has completed. */
__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned parity) {
  asm volatile("{\n"
               ".reg .pred P1;\n"
               "LAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra DONE;\n"
               "bra LAB_WAIT;\n"
               "DONE:\n"
               "}\n" ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}
/* The host's CUtensorMap (128 bytes, opaque). */
struct __align__(64) fs_tmap { unsigned long long opaque[16]; };

/* Copies the box at element coordinates (x = k, y = row) of *map. */
__device__ __forceinline__ void tma_load_2d(void *dst, const fs_tmap *map, int x, int y,
                                            unsigned long long *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
               "l"((unsigned long long)map), "r"(x), "r"(y), "r"(smem_addr(bar)) : "memory");
}

/* ---- thread-block clusters --------------------------------------------- */

/* Like tma_load_2d, but the box lands at the same offset in the shared
** memory of every CTA of the cluster in `mask`, and completes bytes on the
** mbarrier at the same offset in each of them. */
__device__ __forceinline__ void tma_load_2d_multicast(void *dst, const fs_tmap *map, int x, int y,
                                                      unsigned long long *bar, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
               "l"((unsigned long long)map), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"(mask)
               : "memory");
}
/* Arrives on the mbarrier at the same offset as *bar in CTA `rank` of the
** cluster, with the default semantics (release at CTA scope): the caller's
** reads of the slot it releases are complete (wgmma.wait_group returned).
** A release at cluster scope compiled to a GPU-wide memory barrier per
** arrive and cost the clustered variants 40-60% (perf-notes 11g). */
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long *bar, unsigned rank) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
               ::"r"(smem_addr(bar)), "r"(rank) : "memory");
}
/* All threads of all CTAs of the cluster. */
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
               ::: "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

#endif /* FS_TMA_H */
