/*
** fs_ring.h: what the two wgmma families (fsamp_wg.cu, fsamp_wt.cu) share
** around their TMA stage ring: chunks of whole vocab tiles, the ring's
** mbarriers, the producer's copies of one stage (with CLUSTER = 2, H shared
** by multicast) and the release of a consumed stage.  The including
** template defines TILE_V, TILE_B, KB, W_BOX, H_BOX, STAGE_ELEMS, STAGES and
** CLUSTER first and includes fs_device.h and fs_tma.h.
*/
#ifndef FS_RING_H
#define FS_RING_H

/* The tiles of chunk c: n of them, tile j's box from row v0 + j * TILE_V;
** the chunk's rows end before v_end (rows of a box from there on are
** another chunk's, or past V: a cluster's CTAs take as many tiles as the
** larger of their chunks).  The vocabulary is T = ceil(V / TILE_V) whole
** tiles and chunk c of G takes [c * T / G, (c + 1) * T / G), so no row is
** read twice (perf-notes 10b, 11a). */
struct fs_span {
  int v0, v_end, n;
};
__device__ __forceinline__ fs_span chunk_span(const fs_params &p, int c) {
  const int T = (p.V + TILE_V - 1) / TILE_V;
  const int t0 = (int)((long long)c * T / p.num_chunks);
  const int t1 = (int)((long long)(c + 1) * T / p.num_chunks);
  fs_span sp;
  sp.v0 = t0 * TILE_V;
  sp.v_end = min(t1 * TILE_V, p.V);
  sp.n = t1 - t0;
  return sp;
}

/* The consumers of every CTA of the cluster are done with the stage. */
__device__ __forceinline__ void release(unsigned long long *empty_slot, unsigned rank) {
  mbar_arrive(empty_slot);
#if CLUSTER > 1
  mbar_arrive_cluster(empty_slot, rank ^ 1u);
#endif
}

/* Thread 0 initialises the ring's STAGES "full" barriers (one arrival: the
** producer's expect_tx) and "empty" barriers (`arrivals` warps in each CTA
** of the cluster release a slot); then the cluster (or the CTA) meets, so
** that the peer's barriers exist before anything lands in them. */
__device__ __forceinline__ void ring_init(unsigned long long *full, unsigned long long *empty,
                                          int arrivals) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, arrivals * CLUSTER);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
#if CLUSTER > 1
  cluster_sync();
#else
  __syncthreads();
#endif
}

/* The producer's copies into stage `slot` (whose slot the consumers of
** every CTA of the cluster released): TILE_K / 64 boxes of W's rows
** [v, v + TILE_V) and of H's rows [b0, b0 + TILE_B) at hidden offset k0,
** completing on full[slot]; with a cluster each CTA copies its share of
** every H box into both CTAs' stage. */
__device__ __forceinline__ void load_stage(fs_elem *smem, int slot, unsigned long long *full,
                                           const fs_tmap *tmW, const fs_tmap *tmH, int k0,
                                           int v, int b0, unsigned rank) {
  mbar_expect_tx(full + slot, STAGE_ELEMS * 2);
  fs_elem *sW = smem + slot * STAGE_ELEMS, *sH = sW + KB * W_BOX;
#pragma unroll
  for (int kb = 0; kb < KB; kb++) {
    tma_load_2d(sW + kb * W_BOX, tmW, k0 + kb * 64, v, full + slot);
#if CLUSTER > 1
    tma_load_2d_multicast(sH + kb * H_BOX + rank * (TILE_B / CLUSTER) * 64, tmH, k0 + kb * 64,
                          b0 + (int)rank * (TILE_B / CLUSTER), full + slot,
                          (unsigned short)((1u << CLUSTER) - 1u));
#else
    (void)rank;
    tma_load_2d(sH + kb * H_BOX, tmH, k0 + kb * 64, b0, full + slot);
#endif
  }
}

/* A CTA of a cluster stays until its peer no longer signals it (every warp
** that leaves calls this; without a cluster it does nothing). */
__device__ __forceinline__ void cluster_leave() {
#if CLUSTER > 1
  __syncwarp();
  cluster_sync();
#endif
}

#endif
