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
--   tile_v  [v128]  vocab rows per tile (64 * wgs * mb; ping-pong: 64 * mb)
--   tile_b  [b64]   batch rows per CTA = wgmma N
--   tile_k  [k64]   hidden elements per stage (64-element boxes per operand)
--   wgs     [g2]    consumer warpgroups
--   stages  [s4]    pipeline depth
--   cluster [c1]    CTAs per cluster sharing H by TMA multicast (1, 2)
--   mode    [co|pp|ov] cooperative (the warpgroups split each tile),
--                   ping-pong (each warpgroup its own tiles and chunk, so
--                   one's epilogue overlaps the other's wgmmas) or overlap
--                   (cooperative, the whole tile staged and its epilogue
--                   run under the next tile's wgmmas)
--   epi     [e128]  batch columns per epilogue round (at most the batch
--                   tile): 64 halves the staging buffer, which lets a
--                   deeper pipeline fit beside 128- and 256-wide tiles

local common = fs_require("generator/params.lua")
local fam = { template = "templates/fsamp_wg.cu", min_arch = 90 }

local p_tile_v = common.num("v", "tile_v", { 64, 128, 256 })
local p_tile_b = common.num("b", "tile_b", { 16, 32, 64, 128, 256 })
local p_tile_k = common.num("k", "tile_k", { 64, 128 })
local p_wgs = common.num("g", "wgs", { 1, 2 })
local p_stages = common.num("s", "stages", { 2, 3, 4, 6 })
local p_cluster = common.num("c", "cluster", { 1, 2 })
local p_mode = common.enum("mode", { coop = "co", pingpong = "pp", overlap = "ov" },
                           { "coop", "pingpong", "overlap" })
local p_epi = common.num("e", "epi", { 64, 128 })

fam.params = { p_tile_v, p_tile_b, p_tile_k, p_wgs, p_stages, p_cluster, p_mode, p_epi }

local function cthreads(v) return 128 * v.wgs end
local function pingpong(v) return v.mode == "pingpong" end
local function overlap(v) return v.mode == "overlap" end
-- Warpgroups that share one tile (its epilogue), and the tile streams.
local function tile_wgs(v) return pingpong(v) and 1 or v.wgs end
local function streams(v) return pingpong(v) and 2 or 1 end
-- Batch columns and vocab rows per epilogue round (the staging buffer).
local function epi_b(v) return overlap(v) and v.tile_b or math.min(v.tile_b, v.epi) end
local function epi_v(v) return overlap(v) and v.tile_v or 64 * tile_wgs(v) end

-- Stages (dense swizzled boxes) + one epilogue round of staged logits per
-- stream + mbarriers + 1 KB of slack to align the boxes to 1024 bytes.
local function smem_bytes(v)
  return v.stages * (v.tile_v + v.tile_b) * v.tile_k * 2
       + streams(v) * epi_b(v) * (epi_v(v) + 4) * 4 + 16 * v.stages + 1024
end

fam.constraints = {
  { name = "wgmma exists on sm_90a only",
    pred = function(v) return v.arch == 90 end },
  { name = "ping-pong takes two warpgroups and no cluster",
    pred = function(v) return not pingpong(v) or (v.wgs == 2 and v.cluster == 1) end },
  { name = "ping-pong splits the stages into two rings of 2+",
    pred = function(v) return not pingpong(v) or (v.stages % 2 == 0 and v.stages >= 4) end },
  { name = "vocab tile is whole m64 blocks per warpgroup",
    pred = function(v) return v.tile_v % (64 * tile_wgs(v)) == 0 end },
  { name = "epilogue: each consumer thread owns one batch column and whole quads of rows",
    pred = function(v)
      local t, eb = 128 * tile_wgs(v), epi_b(v)
      if t % eb ~= 0 or t // eb > 32 then return false end
      return (epi_v(v) // (t // eb)) % 4 == 0
    end },
  { name = "accumulators fit in registers (<= 128 fp32 per thread)",
    pred = function(v) return (v.tile_v // (64 * tile_wgs(v))) * v.tile_b // 2 <= 128 end },
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
}

function fam.derive(v, a)
  v.mb = v.tile_v // (64 * tile_wgs(v))
  v.cta_chunks = streams(v)
  v.warps_m, v.warps_n = 4 * v.wgs, 1
  v.threads = cthreads(v) + (v.wgs == 2 and 128 or 32) -- producer warpgroup / warp
  v.smem = smem_bytes(v)
  common.persistent_lastcta(v)
  v.tma = 1         -- W and H through tensor maps
  v.whole_tiles = 1 -- chunks of whole vocab tiles
end

-- The built-in default on sm_90 from B = 64 (fsgen.default): the shapes of
-- the H200 winners (docs/perf-notes.md, section 7) -- cooperative 128-row
-- tiles, the batch tile covering the bucket up to 256.
function fam.default(arch, dtype, B, D, V)
  local v = { tile_v = 128, tile_b = 64, tile_k = 128, wgs = 2, stages = 3, cluster = 1,
              mode = "coop", epi = 128 }
  if B > 128 then v.tile_b, v.tile_k = 256, 64
  elseif B > 64 then v.tile_b, v.tile_k, v.stages = 128, 64, 4 end
  return v
end

function fam.macros(v)
  return {
    { "FS_BF16", v.dtype == 1 and 1 or 0 },
    { "TILE_B", v.tile_b }, { "TILE_K", v.tile_k }, { "WGS", v.wgs }, { "MB", v.mb },
    { "STAGES", v.stages }, { "CLUSTER", v.cluster },
    { "PINGPONG", pingpong(v) and 1 or 0 }, { "OVERLAP", overlap(v) and 1 or 0 },
    { "EPI_B", epi_b(v) },
    { "MIN_BLOCKS", v.min_blocks },
  }
end

return fam
