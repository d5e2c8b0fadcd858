-- family_wg.lua: the warpgroup-MMA Hopper family (templates/fsamp_wg.cu).
--
-- The TMA producer and mbarrier ring of the ws family, with the math
-- on wgmma.mma_async (sm_90a only: Blackwell has tcgen05 instead): WGS
-- consumer warpgroups, each owning MB m64 blocks of the vocab tile, the
-- batch tile as the wgmma N, operands read from the swizzled boxes through
-- matrix descriptors.  With two consumer warpgroups the producer is a
-- warpgroup that gives its registers to them (setmaxnreg: 40 / 232), so
-- 128 fp32 accumulators per thread fit.
--
-- Parameters, in name order (the name fragment in brackets):
--   tile_v  [v128]  vocab rows per tile (64 * wgs * mb)
--   tile_b  [b64]   batch rows per CTA = wgmma N
--   tile_k  [k64]   hidden elements per stage (64-element boxes per operand)
--   wgs     [g2]    consumer warpgroups
--   stages  [s4]    pipeline depth (3+: 2 was never within 3% of a
--                   bucket's best on the H200, perf-notes 32a)
--   cluster [c1]    CTAs per cluster sharing H by TMA multicast (1, 2)
--   mode    [co|ov] cooperative (the warpgroups split each tile) or overlap
--                   (cooperative, the whole tile staged and its epilogue
--                   run under the next tile's wgmmas); a ping-pong mode
--                   (each warpgroup its own chunk) left in session 29, never
--                   within 3% of a bucket's best (perf-notes 7d, 32a)
--   epi     [e128]  batch columns per epilogue round (at most the batch
--                   tile): 64 halves the staging buffer, which lets a
--                   deeper pipeline fit beside 128- and 256-wide tiles

local common = fs_require("generator/params.lua")
local fam = { template = "templates/fsamp_wg.cu", min_arch = 90 }

local p_tile_v = common.num("v", "tile_v", { 64, 128, 256 })
local p_tile_b = common.num("b", "tile_b", { 16, 32, 64, 128, 256 })
local p_tile_k = common.num("k", "tile_k", { 64, 128 })
local p_wgs = common.num("g", "wgs", { 1, 2 })
local p_stages = common.num("s", "stages", { 3, 4, 6 })
local p_cluster = common.num("c", "cluster", { 1, 2 })
local p_mode = common.enum("mode", { coop = "co", overlap = "ov" }, { "coop", "overlap" })
local p_epi = common.num("e", "epi", { 64, 128 })

fam.params = { p_tile_v, p_tile_b, p_tile_k, p_wgs, p_stages, p_cluster, p_mode, p_epi }

local function cthreads(v) return 128 * v.wgs end
local function overlap(v) return v.mode == "overlap" end
-- Batch columns and vocab rows per epilogue round (the staging buffer).
local function epi_b(v) return overlap(v) and v.tile_b or math.min(v.tile_b, v.epi) end
local function epi_v(v) return overlap(v) and v.tile_v or 64 * v.wgs end

-- Stages (dense swizzled boxes) + one epilogue round of staged logits
-- + mbarriers + 1 KB of slack to align the boxes to 1024 bytes.
local function smem_bytes(v)
  return v.stages * (v.tile_v + v.tile_b) * v.tile_k * 2
       + epi_b(v) * (epi_v(v) + 4) * 4 + 16 * v.stages + 1024
end

fam.constraints = {
  { name = "wgmma exists on sm_90a only",
    pred = function(v) return v.arch == 90 end },
  { name = "vocab tile is whole m64 blocks per warpgroup",
    pred = function(v) return v.tile_v % (64 * v.wgs) == 0 end },
  { name = "epilogue: each consumer thread owns one batch column and whole quads of rows",
    pred = function(v)
      local t, eb = 128 * v.wgs, epi_b(v)
      if t % eb ~= 0 or t // eb > 32 then return false end
      return (epi_v(v) // (t // eb)) % 4 == 0
    end },
  { name = "accumulators fit in registers (<= 128 fp32 per thread)",
    pred = function(v) return (v.tile_v // (64 * v.wgs)) * v.tile_b // 2 <= 128 end },
  { name = "clusters share H only where it dominates: batch tiles of 64+ rows",
    pred = function(v) return v.cluster == 1 or v.tile_b >= 64 end },
  { name = "narrow epilogue rounds only for batch tiles of 128+",
    pred = function(v) return v.epi == 128 or v.tile_b >= 128 end },
  { name = "overlap stages whole tiles (epi unused: 128)",
    pred = function(v) return not overlap(v) or v.epi == 128 end },
  { name = "shared memory fits the architecture (with the reduction's static flag)",
    pred = function(v, a) return smem_bytes(v) + 64 <= a.smem end },
  { name = "pipeline keeps 32..192 KB of W and H in flight",
    pred = function(v)
      local b = (v.stages - 1) * (v.tile_v + v.tile_b) * v.tile_k * 2
      return b >= 32768 and b <= 196608 end },
  -- Measured out (perf-notes 32a), as the ping-pong mode and 2 stages: in
  -- the H200 tuning reports of sessions 1-28 (29,411 timings: ten LM-head
  -- shapes, bf16 and fp16, the three call modes) no tile of these kinds
  -- came within 3% of its bucket's best; with those two they were half of
  -- the family's variants and of its NVRTC time in CI.
  { name = "measured out: 64-row vocab tiles with 128+ batch tiles (19% behind)",
    pred = function(v) return v.tile_v > 64 or v.tile_b < 128 end },
  { name = "measured out: one warpgroup with 64-column rounds or 256-row batch tiles (8.3% behind)",
    pred = function(v) return v.wgs == 2 or (v.epi == 128 and v.tile_b < 256) end },
  { name = "measured out: 256-row vocab tiles in clusters (3.0% behind)",
    pred = function(v) return v.tile_v < 256 or v.cluster == 1 end },
  { name = "measured out: 128-row batch tiles with 128-wide k-steps (3.2% behind)",
    pred = function(v) return v.tile_b ~= 128 or v.tile_k == 64 end },
}

function fam.derive(v, a)
  v.mb = v.tile_v // (64 * v.wgs)
  v.warps_m, v.warps_n = 4 * v.wgs, 1
  v.threads = cthreads(v) + (v.wgs == 2 and 128 or 32) -- producer warpgroup / warp
  v.smem = smem_bytes(v)
  common.persistent_lastcta(v)
  v.tma = 1         -- W and H through tensor maps
  v.whole_tiles = 1 -- chunks of whole vocab tiles
end

-- The built-in default on sm_90a from B = 33 (fsgen.default): the shapes of
-- the H200 winners (docs/perf-notes.md, section 7) -- cooperative 128-row
-- tiles, the batch tile covering the bucket up to 256 (the 64-row tile with
-- 4 stages: 294.8 against 307.9 us with 3 at Qwen3-8B B = 48, perf-notes 33b).
function fam.default(arch, dtype, B, D, V)
  local v = { tile_v = 128, tile_b = 64, tile_k = 128, wgs = 2, stages = 4, cluster = 1,
              mode = "coop", epi = 128 }
  if B > 128 then v.tile_b, v.tile_k, v.stages = 256, 64, 3
  elseif B > 64 then v.tile_b, v.tile_k = 128, 64 end
  return v
end

function fam.macros(v)
  return {
    { "FS_BF16", v.dtype == 1 and 1 or 0 },
    { "TILE_B", v.tile_b }, { "TILE_K", v.tile_k }, { "WGS", v.wgs }, { "MB", v.mb },
    { "STAGES", v.stages }, { "CLUSTER", v.cluster },
    { "OVERLAP", overlap(v) and 1 or 0 },
    { "EPI_B", epi_b(v) },
    { "MIN_BLOCKS", v.min_blocks },
  }
end

return fam
