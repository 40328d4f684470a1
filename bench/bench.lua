-- Copyright 2026 the qpt authors
-- SPDX-License-Identifier: MIT
--
-- CPU-bound Lua workload of bench/overhead.sh: a mix of kernels that keeps the
-- interpreter's dispatch loop hot (integer and float arithmetic, tables, strings,
-- closures, method calls). Deterministic output: one checksum line per kernel.
-- Usage: lua bench.lua [SCALE]    (run time is roughly proportional to SCALE)

local scale = tonumber(arg and arg[1]) or 10

-- Fannkuch-redux: permutations, array swaps, integer loops.
local function fannkuch(n)
  local perm, perm1, count = {}, {}, {}
  local maxflips, checksum, r, nperm = 0, 0, n, 0
  for i = 0, n - 1 do perm1[i] = i end
  while true do
    while r ~= 1 do count[r - 1] = r; r = r - 1 end
    for i = 0, n - 1 do perm[i] = perm1[i] end
    local flips = 0
    local k = perm[0]
    while k ~= 0 do
      local i, j = 0, k
      while i < j do perm[i], perm[j] = perm[j], perm[i]; i = i + 1; j = j - 1 end
      flips = flips + 1
      k = perm[0]
    end
    if flips > maxflips then maxflips = flips end
    checksum = checksum + (nperm % 2 == 0 and flips or -flips)
    while true do
      if r == n then return checksum, maxflips end
      local perm0 = perm1[0]
      for i = 0, r - 1 do perm1[i] = perm1[i + 1] end
      perm1[r] = perm0
      count[r] = count[r] - 1
      if count[r] > 0 then break end
      r = r + 1
    end
    nperm = nperm + 1
  end
end

-- N-body: float arithmetic on table fields.
local function nbody(steps)
  local PI = 3.141592653589793
  local SOLAR_MASS = 4 * PI * PI
  local DAYS = 365.24
  local bodies = {
    {x = 0, y = 0, z = 0, vx = 0, vy = 0, vz = 0, mass = SOLAR_MASS},
    {x = 4.84143144246472090e+00, y = -1.16032004402742839e+00, z = -1.03622044471123109e-01,
     vx = 1.66007664274403694e-03 * DAYS, vy = 7.69901118419740425e-03 * DAYS,
     vz = -6.90460016972063023e-05 * DAYS, mass = 9.54791938424326609e-04 * SOLAR_MASS},
    {x = 8.34336671824457987e+00, y = 4.12479856412430479e+00, z = -4.03523417114321381e-01,
     vx = -2.76742510726862411e-03 * DAYS, vy = 4.99852801234917238e-03 * DAYS,
     vz = 2.30417297573763929e-05 * DAYS, mass = 2.85885980666130812e-04 * SOLAR_MASS},
    {x = 1.28943695621391310e+01, y = -1.51111514016986312e+01, z = -2.23307578892655734e-01,
     vx = 2.96460137564761618e-03 * DAYS, vy = 2.37847173959480950e-03 * DAYS,
     vz = -2.96589568540237556e-05 * DAYS, mass = 4.36624404335156298e-05 * SOLAR_MASS},
    {x = 1.53796971148509165e+01, y = -2.59193146099879641e+01, z = 1.79258772950371181e-01,
     vx = 2.68067772490389322e-03 * DAYS, vy = 1.62824170038242295e-03 * DAYS,
     vz = -9.51592254519715870e-05 * DAYS, mass = 5.15138902046611451e-05 * SOLAR_MASS},
  }
  local n = #bodies
  local function energy()
    local e = 0
    for i = 1, n do
      local b = bodies[i]
      e = e + 0.5 * b.mass * (b.vx * b.vx + b.vy * b.vy + b.vz * b.vz)
      for j = i + 1, n do
        local b2 = bodies[j]
        local dx, dy, dz = b.x - b2.x, b.y - b2.y, b.z - b2.z
        e = e - b.mass * b2.mass / math.sqrt(dx * dx + dy * dy + dz * dz)
      end
    end
    return e
  end
  local e0 = energy()
  local dt = 0.01
  for _ = 1, steps do
    for i = 1, n do
      local b = bodies[i]
      local bx, by, bz, bm = b.x, b.y, b.z, b.mass
      local bvx, bvy, bvz = b.vx, b.vy, b.vz
      for j = i + 1, n do
        local b2 = bodies[j]
        local dx, dy, dz = bx - b2.x, by - b2.y, bz - b2.z
        local d2 = dx * dx + dy * dy + dz * dz
        local mag = dt / (d2 * math.sqrt(d2))
        local bm2 = b2.mass * mag
        bvx = bvx - dx * bm2; bvy = bvy - dy * bm2; bvz = bvz - dz * bm2
        bm2 = bm * mag
        b2.vx = b2.vx + dx * bm2; b2.vy = b2.vy + dy * bm2; b2.vz = b2.vz + dz * bm2
      end
      b.vx, b.vy, b.vz = bvx, bvy, bvz
      b.x = bx + dt * bvx; b.y = by + dt * bvy; b.z = bz + dt * bvz
    end
  end
  return e0, energy()
end

-- Strings: formatting, concatenation through a buffer, pattern matching, hashing.
local function strings(iters)
  local words = {}
  local seed = 42
  local function rnd(m) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % m end
  for i = 1, 500 do
    local t = {}
    for j = 1, 3 + rnd(8) do t[j] = string.char(97 + rnd(26)) end
    words[i] = table.concat(t)
  end
  local h, count = 0, 0
  for it = 1, iters do
    local buf = {}
    for k = 1, 40 do
      buf[k] = string.format("%s=%d;%5.2f", words[rnd(500) + 1], rnd(100000), rnd(10000) / 7)
    end
    local s = table.concat(buf, " ")
    for key, num in s:gmatch("(%a+)=(%d+)") do
      count = count + #key
      h = (h * 31 + tonumber(num)) % 1000000007
    end
    s = s:gsub("[aeiou]", string.upper)
    h = (h + #s + (s:find("A", 1, true) or 0)) % 1000000007
    if it % 64 == 0 then h = (h + #s:rep(3):sub(10, -10)) % 1000000007 end
  end
  return h, count
end

-- Tables: hash inserts and lookups, sort with a comparison closure.
local function tables(iters)
  local seed = 7
  local function rnd(m) seed = (seed * 69069 + 1) % 4294967296; return seed % m end
  local sum = 0
  for _ = 1, iters do
    local t, keys = {}, {}
    for i = 1, 2000 do
      local k = "k" .. rnd(5000)
      if t[k] == nil then keys[#keys + 1] = k end
      t[k] = (t[k] or 0) + i
    end
    table.sort(keys, function(a, b) return t[a] < t[b] or (t[a] == t[b] and a < b) end)
    for i = 1, #keys, 7 do sum = (sum + t[keys[i]] * i) % 1000000007 end
    local a = {}
    for i = 1, 3000 do a[i] = rnd(1000000) end
    table.sort(a)
    sum = (sum + a[1] + a[#a] + a[1500]) % 1000000007
  end
  return sum
end

-- Objects: metatables, method calls, closures.
local function objects(iters)
  local Vec = {}
  Vec.__index = Vec
  function Vec.new(x, y) return setmetatable({x = x, y = y}, Vec) end
  function Vec:add(o) return Vec.new(self.x + o.x, self.y + o.y) end
  function Vec:scale(f) return Vec.new(self.x * f, self.y * f) end
  function Vec:dot(o) return self.x * o.x + self.y * o.y end
  local function counter()
    local c = 0
    return function(d) c = c + d; return c end
  end
  local acc = Vec.new(0, 0)
  local cnt = counter()
  local total = 0
  for i = 1, iters do
    local v = Vec.new(i % 17, i % 13):scale(0.5)
    acc = acc:add(v)
    total = total + cnt(v:dot(acc) > 1000 and 1 or 2)
    if i % 1000 == 0 then acc = Vec.new(acc.x % 97, acc.y % 89) end
  end
  return total, acc.x, acc.y
end

print(string.format("lua bench, scale %d", scale))
local c, m, fsum = 0, 0, 0
for _ = 1, scale do c, m = fannkuch(8); fsum = fsum + c + m end
print(string.format("fannkuch(8) x%d: %d %d %d", scale, c, m, fsum))
local e0, e1 = nbody(5000 * scale)
print(string.format("nbody %d: %.9f %.9f", 5000 * scale, e0, e1))
print(string.format("strings %d: %d %d", 300 * scale, strings(300 * scale)))
print(string.format("tables %d: %d", 4 * scale, tables(4 * scale)))
print(string.format("objects %d: %d %.3f %.3f", 40000 * scale, objects(40000 * scale)))
