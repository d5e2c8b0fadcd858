-- fsgen.lua: the kernel generator's core, run embedded in libflashsampling
-- (generator/gen.c) under lua_pcall with only base, string, table and math.
--
-- A family file (family_*.lua) declares a design space: ordered parameters
-- with their values, named constraints (predicates over a parameter set and
-- the architecture), derived values, and the template it fills.  This file
-- enumerates the space, names each variant with one string that encodes
-- every parameter, parses names back, and emits the #define block that
-- specialises the template.  Lua picks values; it never writes CUDA C.
--
-- Contracts: enumeration order and names are deterministic; the same
-- parameters always give the same bytes of source.

local fsgen = {}

-- The base revision; gen.c appends a hash of every embedded generator and
-- template file, so any change to them makes a new revision.
fsgen.REVISION = "gen-1"

-- Families, in enumeration order.
local family_order = { "mma", "ws", "wg", "wt", "fma" }
local families = {
  mma = fs_require("generator/family_mma.lua"),
  ws = fs_require("generator/family_ws.lua"),
  wg = fs_require("generator/family_wg.lua"),
  wt = fs_require("generator/family_wt.lua"),
  fma = fs_require("generator/family_fma.lua"),
}
fsgen.families = families

-- Architectures we generate for: name fragment, NVRTC target, smem budget.
local archs = {
  [80]  = { tag = "sm80",  target = "sm_80",  smem = 163 * 1024 },
  [86]  = { tag = "sm86",  target = "sm_86",  smem = 99 * 1024 },
  [89]  = { tag = "sm89",  target = "sm_89",  smem = 99 * 1024 },
  [90]  = { tag = "sm90a", target = "sm_90a", smem = 227 * 1024 },
  [100] = { tag = "sm100", target = "sm_100", smem = 227 * 1024 },
  [120] = { tag = "sm120", target = "sm_120", smem = 99 * 1024 },
}
fsgen.archs = archs

local dtypes = { [1] = "bf16", [2] = "fp16" }
local dtype_ids = { bf16 = 1, fp16 = 2 }

local function arch_info(arch)
  local a = archs[arch]
  if not a then error(string.format("unsupported architecture sm_%d", arch), 0) end
  return a
end

-- The name: fsamp_<dtype>_<arch>_<family>_<param fragments...>
function fsgen.name(v)
  local fam = families[v.family]
  local parts = { "fsamp", dtypes[v.dtype], archs[v.arch].tag, v.family }
  for _, prm in ipairs(fam.params) do
    parts[#parts + 1] = prm.encode(v)
  end
  return table.concat(parts, "_")
end

-- Checks every constraint; returns true or false, "name of broken rule".
function fsgen.check(v)
  local fam = families[v.family]
  local a = arch_info(v.arch)
  for _, c in ipairs(fam.constraints) do
    if not c.pred(v, a) then return false, c.name end
  end
  return true
end

-- Fills derived values (threads, smem, ...) into v and returns v.
local function finish(v)
  local fam = families[v.family]
  fam.derive(v, arch_info(v.arch))
  v.name = fsgen.name(v)
  v.target = archs[v.arch].target
  v.family_name = v.family
  v.template = fam.template
  return v
end

-- All valid variants of every family for (arch, dtype), in a fixed order.
function fsgen.enumerate(arch, dtype)
  arch_info(arch)
  local out = {}
  for _, fname in ipairs(family_order) do
    local fam = families[fname]
    if arch < fam.min_arch then goto next_family end
    local function rec(i, v)
      if i > #fam.params then
        local ok = fsgen.check(v)
        if ok then
          local c = {}
          for k, x in pairs(v) do c[k] = x end
          out[#out + 1] = finish(c)
        end
        return
      end
      local prm = fam.params[i]
      for _, x in ipairs(prm.values) do
        v[prm.key] = x
        rec(i + 1, v)
      end
      v[prm.key] = nil
    end
    rec(1, { family = fname, arch = arch, dtype = dtype })
    ::next_family::
  end
  return out
end

-- Parses a variant name; returns the variant or nil, message.
function fsgen.parse(name)
  local parts = {}
  for p in string.gmatch(name, "[^_]+") do parts[#parts + 1] = p end
  if parts[1] ~= "fsamp" or #parts < 4 then
    return nil, "not a variant name: '" .. name .. "'"
  end
  local dtype = dtype_ids[parts[2]]
  if not dtype then return nil, "unknown dtype '" .. tostring(parts[2]) .. "' in " .. name end
  local arch
  for k, a in pairs(archs) do if a.tag == parts[3] then arch = k end end
  if not arch then return nil, "unknown architecture '" .. parts[3] .. "' in " .. name end
  local fam = families[parts[4]]
  if not fam then return nil, "unknown family '" .. parts[4] .. "' in " .. name end
  if #parts ~= 4 + #fam.params then
    return nil, string.format("%s: expected %d parameter fields, found %d",
                              name, #fam.params, #parts - 4)
  end
  local v = { family = parts[4], arch = arch, dtype = dtype }
  for i, prm in ipairs(fam.params) do
    local ok = prm.decode(v, parts[4 + i])
    if not ok then
      local vals = {}
      for j, x in ipairs(prm.values) do vals[j] = prm.encode({ [prm.key] = x }) end
      return nil, string.format("%s: bad field '%s' for %s (one of %s)", name, parts[4 + i],
                                prm.key, table.concat(vals, ", "))
    end
  end
  local ok, why = fsgen.check(v)
  if not ok then return nil, name .. ": breaks constraint '" .. why .. "'" end
  finish(v)
  if v.name ~= name then return nil, "non-canonical name " .. name .. " (means " .. v.name .. ")" end
  return v
end

-- The #define block that specialises the template, with its provenance.
function fsgen.defines(v)
  local fam = families[v.family]
  local lines = {
    "// Generated by the flashsampling generator (" .. fsgen.REVISION .. ")",
    "// variant " .. v.name,
    "// template " .. fam.template .. ", target " .. v.target,
  }
  for _, d in ipairs(fam.macros(v)) do
    lines[#lines + 1] = string.format("#define %s %s", d[1], tostring(d[2]))
  end
  lines[#lines + 1] = ""
  return table.concat(lines, "\n")
end

-- "key=value,..." of every parameter, in declaration order.
function fsgen.params(v)
  local fam = families[v.family]
  local t = {}
  for _, prm in ipairs(fam.params) do t[#t + 1] = prm.key .. "=" .. tostring(v[prm.key]) end
  return table.concat(t, ",")
end

-- The built-in default for a shape when nothing is tuned.
function fsgen.default(arch, dtype, B, D, V)
  arch_info(arch)
  local fname = arch >= families.ws.min_arch and "ws" or "mma"
  if arch == 90 and B > 32 then fname = "wg" end -- wgmma: sm_90a only (perf-notes 33b)
  local v = families[fname].default(arch, dtype, B, D, V)
  v.family, v.arch, v.dtype = fname, arch, dtype
  local ok, why = fsgen.check(v)
  if not ok then
    -- Smaller GPUs (less shared memory): the valid variant of the same
    -- family with the widest batch tile up to the wanted one, then the most
    -- shared memory (deepest pipeline) that fits.
    local all = fsgen.enumerate(arch, dtype)
    local tb = v.tile_b
    while tb >= 8 do
      local best
      for _, c in ipairs(all) do
        if c.family == fname and c.tile_b == tb and c.reduce ~= "pass2"
           and (c.grid == nil or c.grid == "persistent")
           and (not best or c.smem > best.smem or (c.smem == best.smem and c.name < best.name)) then
          best = c
        end
      end
      if best then return best end
      tb = tb // 2
    end
    error("no valid default: " .. why, 0)
  end
  return finish(v)
end

return fsgen
