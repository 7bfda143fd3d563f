-- perflab: the interleaved design's turns for clients on another host (perflab/hosts/turns.py drives it).
--
-- The host's sysbench runs this file as a plain Lua script (`sysbench turn_agent.lua`: LuaJIT with
-- its FFI), once per host and run. It does there what perflab does here for a local seat
-- (perflab/run/seat.py, perflab/workloads/turn_latency.py): it owns each seat's shared file that
-- turns.lua maps, writes the time of every resume into it (the host's CLOCK_MONOTONIC, the clock
-- turns.lua times events with) just before it sends SIGCONT, stops the client's process group with
-- SIGSTOP, and reads the histograms back. One agent serves every seat of the host, one command
-- at a time, so one seat is stopped before the next one resumes.
--
-- Commands, one a line on stdin (SLOT: perflab's number for the seat):
--   M SLOT PATH THREADS  create PATH (0600) for THREADS client threads, map it, write its header; "ok"
--   G SLOT PGID          the seat's client's process group; "ok"
--   C SLOT               a new turn: the turn count and the resume time written, then SIGCONT (no answer)
--   S SLOT               SIGSTOP to the group; "ok" once sent (the client stops before any other runs)
--   R SLOT               "h SUM SPANNED R W O E I:C ..." the threads' histogram summed: the latency sum
--                        (ms), the spanned events, sysbench's reported reads, writes, other and events, and
--                        the buckets that hold events (index:count)
-- A line it cannot use is answered "error ..."; at the end of its input it exits.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } perflab_timespec;
int clock_gettime(int clk_id, perflab_timespec *tp);
int open(const char *path, int flags, int mode);
int ftruncate(int fd, long length);
void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);
int close(int fd);
int kill(int pid, int sig);
]]

-- Linux's numbers on x86-64 and arm64 (asm-generic): O_RDWR|O_CREAT|O_EXCL, SIGCONT, SIGSTOP
local O_CREATE, PROT_RW, MAP_SHARED, CLOCK_MONOTONIC = 2 + 64 + 128, 3, 1, 1
local SIGCONT, SIGSTOP = 18, 19
local LAYOUT, BUCKETS, HEADER = 2, 1024, 16 -- turn_latency.py's LAYOUT, BUCKETS, HEADER
local STRIDE = BUCKETS + 2

local ts = ffi.new("perflab_timespec")
local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local seats = {}

local function map(slot, path, threads)
  local bytes = (HEADER + threads * STRIDE) * 8
  local fd = ffi.C.open(path, O_CREATE, 384) -- 0600
  if fd < 0 then return "error cannot create " .. path end
  local sized = ffi.C.ftruncate(fd, bytes)
  local at = ffi.C.mmap(nil, bytes, PROT_RW, MAP_SHARED, fd, 0)
  ffi.C.close(fd)
  if sized ~= 0 or ffi.cast("intptr_t", at) == -1 then return "error cannot map " .. path end
  local shared = ffi.cast("volatile double *", at)
  shared[1], shared[2], shared[3] = LAYOUT, BUCKETS, STRIDE
  seats[slot] = { shared = shared, threads = threads, turn = 0, group = nil }
  return "ok"
end

local function histogram(seat)
  local shared, counts, sum, spanned = seat.shared, {}, 0, 0
  for t = 0, seat.threads - 1 do
    local base = HEADER + t * STRIDE
    for i = 0, BUCKETS - 1 do
      local c = shared[base + i]
      if c ~= 0 then counts[i] = (counts[i] or 0) + c end
    end
    sum = sum + shared[base + BUCKETS]
    spanned = spanned + shared[base + BUCKETS + 1]
  end
  local out = { string.format("h %.17g %.17g %.17g %.17g %.17g %.17g", sum, spanned,
                              shared[5], shared[6], shared[7], shared[8]) }
  for i = 0, BUCKETS - 1 do
    if counts[i] then out[#out + 1] = string.format("%d:%.17g", i, counts[i]) end
  end
  return table.concat(out, " ")
end

local function answer(text)
  io.stdout:write(text .. "\n")
  io.stdout:flush()
end

answer("ready")
for line in io.lines() do
  local op, slot, a, b = line:match("^(%u) (%d+) ?(%S*) ?(%S*)$")
  local seat = seats[slot]
  if op == "C" and seat and seat.group then
    seat.turn = seat.turn + 1
    seat.shared[4] = seat.turn
    seat.shared[0] = now_ms()
    ffi.C.kill(-seat.group, SIGCONT)
  elseif op == "S" and seat and seat.group then
    ffi.C.kill(-seat.group, SIGSTOP)
    answer("ok")
  elseif op == "R" and seat then
    answer(histogram(seat))
  elseif op == "M" and a ~= "" and tonumber(b) then
    answer(map(slot, a, tonumber(b)))
  elseif op == "G" and seat and tonumber(a) then
    seat.group = tonumber(a)
    answer("ok")
  else
    answer("error " .. line)
  end
end
