-- params.lua: parameter kinds shared by the family files.  A parameter has
-- a key, its values, and how it is written into / read from a variant name.

local M = {}

-- Is x one of the list's values?
local function member(values, x)
  for _, y in ipairs(values) do
    if y == x then return true end
  end
  return false
end

-- A number written as prefix .. value ("v128").
function M.num(prefix, key, values)
  return {
    key = key, values = values,
    encode = function(v) return prefix .. v[key] end,
    decode = function(v, s) -- one of the values (a name outside them is no variant)
      local n = math.tointeger(tonumber(string.match(s, "^" .. prefix .. "(%d+)$")))
      if not member(values, n) then return false end
      v[key] = n
      return true
    end,
  }
end

-- One of a few named values, each with its name fragment.
function M.enum(key, codes, values)
  return {
    key = key, values = values,
    encode = function(v) return codes[v[key]] end,
    decode = function(v, s)
      for val, code in pairs(codes) do
        if code == s then v[key] = val; return true end
      end
      return false
    end,
  }
end

-- The warp layout as one number m * 10 + n ("w4x1"), so that it enumerates
-- like the others; split() fills warps_m and warps_n.
function M.split(v)
  v.warps_m, v.warps_n = v.warps // 10, v.warps % 10
end

function M.warps(values)
  return {
    key = "warps", values = values,
    encode = function(v) return string.format("w%dx%d", v.warps // 10, v.warps % 10) end,
    decode = function(v, s) -- one of the values, as M.num
      local m, n = string.match(s, "^w(%d)x(%d)$")
      local w = m and math.tointeger(tonumber(m)) * 10 + math.tointeger(tonumber(n))
      if not member(values, w) then return false end
      v.warps = w
      M.split(v)
      return true
    end,
  }
end

-- Rules of the mma.sync warp tiling that the mma and ws families share:
-- WARPS_M x WARPS_N warps of m16n8k16 fragments over a TILE_V x TILE_B
-- tile, and the epilogue of templates/fs_device.h run by those 32 * WARPS_M *
-- WARPS_N threads.  Each is a constraint predicate; the family file states
-- its message beside it (the name a rejected variant is reported by, which
-- tests/cpu/test_constraints reads from the family files).  Enumeration sets
-- `warps` alone, so every rule splits it first; a family's later rules may
-- read warps_m and warps_n.
local function warp_rule(rule)
  return function(v) M.split(v); return rule(v) end
end

M.warp_tiling = {
  -- whole m16 fragments along the vocab tile for every vocab warp
  m16_blocks = warp_rule(function(v) return v.tile_v % (16 * v.warps_m) == 0 end),
  -- whole n8 fragments along the batch tile for every batch warp
  n8_blocks = warp_rule(function(v) return v.tile_b % (8 * v.warps_n) == 0 end),
  -- the epilogue: the threads cover the batch tile (at most 32 per column),
  -- each owning whole quads of the column's rows
  epilogue = warp_rule(function(v)
    local t = 32 * v.warps_m * v.warps_n
    return t % v.tile_b == 0 and t // v.tile_b <= 32 and (v.tile_v // (t // v.tile_b)) % 4 == 0
  end),
  -- 128-row batch tiles split over two or more batch warps
  wide_batch_split = warp_rule(function(v) return v.tile_b < 128 or v.warps_n >= 2 end),
  -- batch warps only where each keeps 16 or more batch columns
  batch_split_16 = warp_rule(function(v) return v.warps_n == 1 or v.tile_b // v.warps_n >= 16 end),
  -- at most 64 fp32 accumulators per thread (4 per m16n8 fragment)
  accumulators_64 = warp_rule(function(v)
    return (v.tile_v // v.warps_m // 16) * (v.tile_b // v.warps_n // 8) * 4 <= 64 end),
}

-- The launch facts shared by the one-launch persistent families (ws, wg,
-- fma): a persistent grid of balanced chunks, the last CTA of a batch tile
-- reduces the candidates, D a multiple of 8 (16-byte rows), one CTA per SM
-- at least.  A family may override min_blocks after the call.
function M.persistent_lastcta(v)
  v.lastcta = 1
  v.persistent = 1
  v.k_multiple = 8
  v.min_blocks = 1
end

return M
