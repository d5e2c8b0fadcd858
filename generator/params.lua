-- params.lua: parameter kinds shared by the family files.  A parameter has
-- a key, its values, and how it is written into / read from a variant name.

local M = {}

-- A number written as prefix .. value ("v128").
function M.num(prefix, key, values)
  return {
    key = key, values = values,
    encode = function(v) return prefix .. v[key] end,
    decode = function(v, s)
      local n = string.match(s, "^" .. prefix .. "(%d+)$")
      if not n then return false end
      v[key] = math.tointeger(tonumber(n))
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
    decode = function(v, s)
      local m, n = string.match(s, "^w(%d+)x(%d+)$")
      if not m then return false end
      v.warps = math.tointeger(tonumber(m)) * 10 + math.tointeger(tonumber(n))
      M.split(v)
      return true
    end,
  }
end

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
