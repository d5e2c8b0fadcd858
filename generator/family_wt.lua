-- family_wt.lua: the transposed warpgroup-MMA Hopper family
-- (templates/fsamp_wt.cu).
--
-- The TMA producer, mbarrier ring and clusters of the wg family, with the
-- wgmma operands swapped: the batch rows are the M (m64 blocks of the H
-- box), the vocabulary tile the N, so that each thread holds whole rows'
-- worth of a tile's columns and samples them in registers (no staging of
-- logits in shared memory).  WGS consumer warpgroups of MB m64 blocks
-- each; with two, the producer warpgroup gives its registers to them
-- (setmaxnreg 40 / 232) so that 128 accumulators per thread fit.
--
-- Parameters, in name order (the name fragment in brackets):
--   tile_v  [v128]  vocab columns per tile = wgmma N (128, 192, 256; 192 is
--                   the N of cuBLAS's B = 128 tiles, perf-notes 20; 64 was
--                   never within 5% of a bucket's best on the H200 in 730
--                   timings and left in session 29, perf-notes 32a)
--   tile_b  [b256]  batch rows per CTA = 64 * wgs * mb
--   tile_k  [k64]   hidden elements per stage (64-element boxes per operand)
--   wgs     [g2]    consumer warpgroups
--   stages  [s4]    pipeline depth
--   cluster [c1]    CTAs per cluster sharing H by TMA multicast (1, 2)

local common = fs_require("generator/params.lua")
local fam = { template = "templates/fsamp_wt.cu", min_arch = 90 }

local p_tile_v = common.num("v", "tile_v", { 128, 192, 256 })
local p_tile_b = common.num("b", "tile_b", { 64, 128, 256 })
local p_tile_k = common.num("k", "tile_k", { 64 })
local p_wgs = common.num("g", "wgs", { 1, 2 })
local p_stages = common.num("s", "stages", { 3, 4, 5, 6 })
local p_cluster = common.num("c", "cluster", { 1, 2 })

fam.params = { p_tile_v, p_tile_b, p_tile_k, p_wgs, p_stages, p_cluster }

local function mb(v) return v.tile_b // (64 * v.wgs) end

-- Stages (dense swizzled boxes) + mbarriers + each consumer thread's best
-- of each of its rows (12 bytes, 4 per batch row) + 1 KB of slack to align
-- the boxes to 1024 bytes; no staging buffer.
local function smem_bytes(v)
  return v.stages * (v.tile_v + v.tile_b) * v.tile_k * 2 + 16 * v.stages + 48 * v.tile_b + 1024
end

fam.constraints = {
  { name = "wgmma exists on sm_90a only",
    pred = function(v) return v.arch == 90 end },
  { name = "batch tile is whole m64 blocks per warpgroup",
    pred = function(v) return v.tile_b % (64 * v.wgs) == 0 end },
  { name = "one consumer warpgroup only for 64-row batch tiles",
    pred = function(v) return v.wgs == 2 or v.tile_b == 64 end },
  { name = "accumulators fit in registers (<= 128 fp32 per thread)",
    pred = function(v) return mb(v) * v.tile_v // 2 <= 128 end },
  { name = "one consumer warpgroup keeps <= 64 accumulators (no producer registers to take)",
    pred = function(v) return v.wgs == 2 or mb(v) * v.tile_v // 2 <= 64 end },
  { name = "clusters share H only where it dominates: batch tiles of 128+ rows",
    pred = function(v) return v.cluster == 1 or v.tile_b >= 128 end },
  { name = "shared memory fits the architecture (with the reduction's static flag)",
    pred = function(v, a) return smem_bytes(v) + 64 <= a.smem end },
}
-- (Every combination on offer keeps 32 KB or more of W and H in flight, the
-- smallest being v128_b64_s3; shared memory bounds the rest.)

function fam.derive(v, a)
  v.mb = mb(v)
  v.warps_m, v.warps_n = 4 * v.wgs, 1
  v.threads = 128 * v.wgs + (v.wgs == 2 and 128 or 32) -- producer warpgroup / warp
  v.smem = smem_bytes(v)
  common.persistent_lastcta(v)
  v.tma = 1         -- W and H through tensor maps
  v.whole_tiles = 1 -- chunks of whole vocab tiles
end

-- The family's default for a bucket (fsgen.default does not pick this
-- family; like fma's, it names a valid variant): at B = 128 and 256 the
-- tiles of run U (perf-notes 19b), below a 64-row tile of one warpgroup.
function fam.default(arch, dtype, B, D, V)
  local v = { tile_v = 128, tile_b = 256, tile_k = 64, wgs = 2, stages = 4, cluster = 1 }
  if B <= 64 then v.tile_b, v.wgs = 64, 1
  elseif B <= 128 then v.tile_b, v.stages = 128, 6 end
  return v
end

function fam.macros(v)
  return {
    { "FS_BF16", v.dtype == 1 and 1 or 0 },
    { "TILE_V", v.tile_v }, { "TILE_K", v.tile_k }, { "WGS", v.wgs }, { "MB", v.mb },
    { "STAGES", v.stages }, { "CLUSTER", v.cluster },
    { "MIN_BLOCKS", v.min_blocks },
  }
end

return fam
