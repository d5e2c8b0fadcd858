-- family_fma.lua: the plain-FFMA family for the smallest batches
-- (templates/fsamp_fma.cu): no tensor cores, no shared-memory pipeline;
-- register-staged 16-byte vector loads of W (streamed, L1 no-allocate) and
-- H (read-only path), fp32 FMAs, a butterfly reduce-scatter per warp.
-- Runs on sm_80 and later.
--
-- Parameters, in name order (the name fragment in brackets):
--   tile_b  [b1]   batch rows per CTA (1..8)
--   rows    [r8]   vocab rows per warp and tile
--   warps   [w8]   warps per CTA (the tile is warps * rows rows)
--   unroll  [u1]   K steps of loads held in registers before their FMAs

local common = fs_require("generator/params.lua")
local fam = { template = "templates/fsamp_fma.cu", min_arch = 80 }

local p_tile_b = common.num("b", "tile_b", { 1, 2, 4, 8 })
local p_rows = common.num("r", "rows", { 4, 8, 16 })
local p_warps = common.num("w", "nwarps", { 4, 8 })
local p_unroll = common.num("u", "unroll", { 1, 2 })

fam.params = { p_tile_b, p_rows, p_warps, p_unroll }

-- 32-bit registers of staged loads (4 per vector), accumulators and the
-- converted H vector of each batch row.
local function data_regs(v)
  return v.unroll * (v.rows + v.tile_b) * 4 + v.rows * v.tile_b + 8 * v.tile_b
end

local function tile_v(v) return v.nwarps * v.rows end

fam.constraints = {
  { name = "staged loads, accumulators and H fit in 112 registers",
    pred = function(v) return data_regs(v) <= 112 end },
  { name = "epilogue: whole quads of rows per lane",
    pred = function(v)
      local tpc = math.min(32 // v.tile_b, tile_v(v) // 4)
      return (tile_v(v) // tpc) % 4 == 0 end },
  { name = "at least 4 KB of W in flight per warp, or 2 steps of it",
    pred = function(v) return v.rows * v.unroll >= 8 end },
}

function fam.derive(v, a)
  v.tile_v = tile_v(v)
  v.tile_k = 256
  v.warps_m, v.warps_n = v.nwarps, 1
  v.threads = 32 * v.nwarps
  common.persistent_lastcta(v)
  v.min_blocks = 512 // v.threads -- >= 16 warps per SM: <= 128 registers
  v.smem = 0                      -- static shared memory only
  v.load = 16
end

function fam.default(arch, dtype, B, D, V)
  return { tile_b = B <= 1 and 1 or B <= 2 and 2 or 4, rows = 8, nwarps = 8, unroll = 1 }
end

function fam.macros(v)
  return {
    { "FS_BF16", v.dtype == 1 and 1 or 0 },
    { "TILE_B", v.tile_b }, { "ROWS", v.rows }, { "WARPS", v.nwarps },
    { "UNROLL", v.unroll }, { "MIN_BLOCKS", v.min_blocks },
  }
end

return fam
