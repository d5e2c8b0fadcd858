-- family_ws.lua: the warp-specialised Hopper family (templates/fsamp_ws.cu).
--
-- One producer warp streams W and H with 2-D tensor copies (TMA engine,
-- 64-element 128-byte-swizzled boxes, zero fill at the edges) into a
-- STAGES-deep ring completed on mbarriers; WARPS_M x WARPS_N consumer warps
-- run mma.sync m16n8k16 and the shared epilogue.  sm_90 and later.
--
-- Parameters, in name order (the name fragment in brackets):
--   tile_v  [v128]  vocab rows per CTA tile
--   tile_b  [b16]   batch rows per CTA
--   tile_k  [k128]  hidden elements per stage (64-element boxes per operand)
--   warps   [w4x1]  consumer warps along vocab x along batch
--   stages  [s4]    pipeline depth

local common = fs_require("generator/params.lua")
local fam = { template = "templates/fsamp_ws.cu", min_arch = 90 }

local p_tile_v = common.num("v", "tile_v", { 64, 128, 256 })
local p_tile_b = common.num("b", "tile_b", { 8, 16, 32, 64, 128 })
local p_tile_k = common.num("k", "tile_k", { 64, 128, 256 })
local p_warps = common.warps({ 21, 41, 81, 22, 42 })
local p_stages = common.num("s", "stages", { 3, 4, 6 })

fam.params = { p_tile_v, p_tile_b, p_tile_k, p_warps, p_stages }

-- Stages (dense swizzled boxes) + staged logits + mbarriers + 1 KB of
-- slack to align the boxes to 1024 bytes.
local function smem_bytes(v)
  return v.stages * (v.tile_v + v.tile_b) * v.tile_k * 2
       + v.tile_b * (v.tile_v + 4) * 4 + 16 * v.stages + 1024
end

local function cthreads(v) return 32 * v.warps_m * v.warps_n end

-- The warp-tiling rules are shared with the mma family (params.lua).
local tiling = common.warp_tiling
fam.constraints = {
  { name = "the architecture has cp.async.bulk and mbarrier tx-counts (sm_90+)",
    pred = function(v) return v.arch >= 90 end },
  { name = "vocab tile divides into m16 blocks per warp", pred = tiling.m16_blocks },
  { name = "batch tile divides into n8 blocks per warp", pred = tiling.n8_blocks },
  { name = "epilogue: each consumer thread owns one batch column and whole quads of rows",
    pred = tiling.epilogue },
  { name = "128-row batch tiles only split over 2+ batch warps", pred = tiling.wide_batch_split },
  { name = "batch-split warps only when each warp keeps >= 16 batch columns",
    pred = tiling.batch_split_16 },
  { name = "accumulators fit in registers (<= 64 fp32 per thread)",
    pred = tiling.accumulators_64 },
  { name = "shared memory fits the architecture",
    pred = function(v, a) return smem_bytes(v) + 1024 <= a.smem end },
  { name = "pipeline keeps 48..192 KB of W in flight",
    pred = function(v)
      local b = (v.stages - 1) * v.tile_v * v.tile_k * 2
      return b >= 49152 and b <= 196608 end },
  -- Measured out on sm_90a (perf-notes 32a), as in family_wg.lua: no tile of
  -- these kinds came within 3% of its bucket's best on the H200, where wg
  -- wins from B = 64.  sm_100 keeps them (nothing measured there).
  { name = "measured out on sm_90a: 64+ batch tiles (20% behind) and 256-row vocab tiles (4.1%)",
    pred = function(v) return v.arch ~= 90 or (v.tile_b < 64 and v.tile_v < 256) end },
}

function fam.derive(v, a)
  common.split(v)
  v.threads = cthreads(v) + 32
  v.smem = smem_bytes(v)
  common.persistent_lastcta(v)
  v.tma = 1 -- W and H through tensor maps
end

-- Heuristic default before tuning on sm_90+: the shapes of fs-tune's H200
-- winners (docs/perf-notes.md) -- deep pipelines of 64-wide K boxes for
-- small batches, 128-wide K and split batch warps from B = 32, 256-row
-- vocab tiles with 64-row batch tiles beyond B = 64.  The 64-row branches
-- serve sm_100 and sm_120: on sm_90a wg takes B > 32 (fsgen.default).
function fam.default(arch, dtype, B, D, V)
  local v = { tile_v = 128, tile_k = 64, stages = 6 }
  if B <= 16 then v.tile_b, v.warps = 16, 41
  elseif B <= 32 then v.tile_b, v.warps, v.tile_k, v.stages = 32, 42, 128, 4
  elseif B <= 64 then v.tile_b, v.warps, v.tile_k, v.stages = 64, 42, 128, 3
  else v.tile_v, v.tile_b, v.warps, v.stages = 256, 64, 42, 3 end
  return v
end

function fam.macros(v)
  return {
    { "FS_BF16", v.dtype == 1 and 1 or 0 },
    { "TILE_V", v.tile_v }, { "TILE_B", v.tile_b }, { "TILE_K", v.tile_k },
    { "WARPS_M", v.warps_m }, { "WARPS_N", v.warps_n },
    { "STAGES", v.stages }, { "REDUCE_LASTCTA", 1 }, { "MIN_BLOCKS", v.min_blocks },
  }
end

return fam
