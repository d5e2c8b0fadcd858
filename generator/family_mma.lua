-- family_mma.lua: the tensor-core mma.sync family (templates/fsamp_mma.cu).
--
-- Vocab tile is the M dimension of m16n8k16, batch tile N, hidden K; W and H
-- stream through a cp.async pipeline.  Runs on sm_80 and later.
--
-- Parameters, in name order (the name fragment in brackets):
--   tile_v  [v128]  vocab rows per CTA tile
--   tile_b  [b16]   batch rows per CTA
--   tile_k  [k64]   hidden elements per pipeline stage
--   warps   [w4x1]  warps along vocab x along batch
--   stages  [s4]    pipeline depth
--   load    [l16]   bytes per cp.async
--   reduce  [rl|r2] last-CTA reduction or a second launch
--   grid    [gp|gt] persistent (one wave of CTAs, balanced chunks) or one
--                   CTA per vocab tile

local common = fs_require("generator/params.lua")
local fam = { template = "templates/fsamp_mma.cu", min_arch = 80 }

local p_tile_v = common.num("v", "tile_v", { 64, 128, 256 })
local p_tile_b = common.num("b", "tile_b", { 8, 16, 32, 64, 128 })
local p_tile_k = common.num("k", "tile_k", { 32, 64, 128 })
local warps = common.warps({ 21, 41, 81, 22, 42 })
local p_stages = common.num("s", "stages", { 2, 4, 6 })
local p_load = common.num("l", "load", { 16, 8 })
local p_reduce = common.enum("reduce", { last = "rl", pass2 = "r2" }, { "last", "pass2" })
local p_grid = common.enum("grid", { persistent = "gp", tiles = "gt" }, { "persistent", "tiles" })

fam.params = { p_tile_v, p_tile_b, p_tile_k, warps, p_stages, p_load, p_reduce, p_grid }

local split = common.split

-- Pipeline stages plus the staged fp32 logits of one tile (the epilogue).
local function smem_bytes(v)
  return v.stages * (v.tile_v + v.tile_b) * (v.tile_k + 8) * 2
       + v.tile_b * (v.tile_v + 4) * 4
end

-- Named predicates; the first that fails names why a variant is invalid.
-- The warp-tiling rules are shared with the ws family (params.lua); each
-- splits `warps`, so the rules after the first may read warps_m, warps_n.
local tiling = common.warp_tiling
fam.constraints = {
  { name = "vocab tile divides into m16 blocks per warp", pred = tiling.m16_blocks },
  { name = "batch tile divides into n8 blocks per warp", pred = tiling.n8_blocks },
  { name = "64 to 256 threads per CTA",
    pred = function(v) local t = 32 * v.warps_m * v.warps_n; return t >= 64 and t <= 256 end },
  { name = "epilogue: each thread owns one batch column and whole quads of rows",
    pred = tiling.epilogue },
  { name = "128-row batch tiles only split over 2+ batch warps", pred = tiling.wide_batch_split },
  { name = "accumulators fit in registers (<= 64 fp32 per thread)",
    pred = tiling.accumulators_64 },
  { name = "shared memory fits the architecture",
    pred = function(v, a) return smem_bytes(v) + 4096 <= a.smem end },
  { name = "pipeline keeps 32..96 KB of W in flight",
    pred = function(v)
      local b = (v.stages - 1) * v.tile_v * v.tile_k * 2
      return b >= 32768 and b <= 98304 end },
  { name = "8-byte loads only as a probe: 64-wide K tiles, batch tile <= 16",
    pred = function(v) return v.load == 16 or (v.tile_k == 64 and v.tile_b <= 16) end },
  { name = "32-wide K tiles only with 256-row vocab tiles (16 KB stages)",
    pred = function(v) return v.tile_k ~= 32 or v.tile_v == 256 end },
  { name = "second-launch reduction probed on 128-row tiles, persistent grid",
    pred = function(v)
      return v.reduce == "last" or (v.grid == "persistent" and v.tile_v == 128) end },
  { name = "one CTA per tile probed on 128-row tiles with >= 4 stages",
    pred = function(v) return v.grid == "persistent" or (v.tile_v == 128 and v.stages >= 4) end },
  { name = "batch-split warps only when each warp keeps >= 16 batch columns",
    pred = tiling.batch_split_16 },
  -- On sm_90a the TMA and wgmma families win every bucket (perf-notes 25c:
  -- the best mma.sync tile 7.6-11% behind at B <= 8, 1.3-2.9x at B >= 64),
  -- and the built-in default there is ws or wg, so the family stays only as
  -- the tiles of its own default (fam.default, sm_80's built-in) with their
  -- reductions and grids, which the GPU tests run on the H200: the other 283
  -- tiles cost CI ~4.5 minutes of NVRTC for nothing (perf-notes 26a).
  -- sm_100 has ws too (the same mma.sync math on TMA loads) and gets the
  -- same cut, by the H200's evidence alone: no Blackwell GPU measured it
  -- (its 566 other tiles were a fifth of CI's NVRTC time, perf-notes 32c).
  -- sm_80, sm_86, sm_89 and sm_120 keep the whole space (nothing measured
  -- there; CI compiles sm_80, sm_90a and sm_100).
  { name = "on sm_90a and sm_100 only 128 x 64 tiles, 4 stages, 16-byte loads, 4x1 or 4x2 warps",
    pred = function(v)
      return (v.arch ~= 90 and v.arch ~= 100)
        or (v.tile_v == 128 and v.tile_k == 64 and v.stages == 4 and v.load == 16
            and v.warps_m == 4) end },
}

function fam.derive(v, a)
  split(v)
  v.threads = 32 * v.warps_m * v.warps_n
  v.smem = smem_bytes(v)
  v.lastcta = v.reduce == "last" and 1 or 0
  v.persistent = v.grid == "persistent" and 1 or 0
  v.min_blocks = 1
  v.k_multiple = 8
end

function fam.macros(v)
  return {
    { "FS_BF16", v.dtype == 1 and 1 or 0 },
    { "TILE_V", v.tile_v }, { "TILE_B", v.tile_b }, { "TILE_K", v.tile_k },
    { "WARPS_M", v.warps_m }, { "WARPS_N", v.warps_n },
    { "STAGES", v.stages }, { "LOAD_BYTES", v.load },
    { "REDUCE_LASTCTA", v.lastcta }, { "MIN_BLOCKS", v.min_blocks },
  }
end

-- Heuristic default before tuning: W streaming for small B, wider batch
-- tiles as B grows (W is re-read once per batch tile).
function fam.default(arch, dtype, B, D, V)
  local v = { tile_v = 128, tile_k = 64, stages = 4, load = 16,
              reduce = "last", grid = "persistent" }
  if B <= 8 then v.tile_b, v.warps = 8, 41
  elseif B <= 16 then v.tile_b, v.warps = 16, 41
  elseif B <= 32 then v.tile_b, v.warps = 32, 41
  elseif B <= 64 or arch < 90 then v.tile_b, v.warps = 64, 42
  else v.tile_b, v.warps = 128, 42 end
  return v
end

return fam
