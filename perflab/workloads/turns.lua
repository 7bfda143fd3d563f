-- perflab: latency under the interleaved design (perflab/workloads/turn_latency.py reads what this writes).
--
-- sysbench runs this file in place of the test; it loads the test (PERFLAB_TEST: a name from
-- /usr/share/sysbench or a path to a .lua script) and times each of its events. perflab stops
-- the client between its turns (SIGSTOP) and, just before each turn's SIGCONT, writes the time
-- (CLOCK_MONOTONIC, ms) at the start of the shared file (PERFLAB_TURNS). An event that started
-- before the last resume was stopped while it ran: its latency would count the other servers'
-- turns, so it is counted apart ("spanned"), not in the histogram. Each sysbench thread adds to its own part of
-- the file (no locks): its histogram, in sysbench 1.0's buckets (sb_histogram.c: 1024 buckets,
-- log-spaced from 0.001 ms to 100000 ms), the sum of its latencies, and its spanned events.
--
-- Layout: doubles. [0] the last resume (CLOCK_MONOTONIC, ms), [1] layout version, [2] buckets,
-- [3] doubles per thread, [4] turns so far, [5..8] sysbench's own counters summed over its
-- per-second reports (reads, writes, other, events: queries per event for a server without
-- statement counters, perflab/workloads/turn_counts.py), [9..15] unused; thread t (sysbench.tid, from 0)
-- at 16 + t * STRIDE: BUCKETS counts, sum (ms), spanned.

local ffi = require("ffi")

local test = os.getenv("PERFLAB_TEST")
if test:find("/", 1, true) or test:sub(-4) == ".lua" then
  dofile(test)
else
  require(test)
end

local BUCKETS, HEADER = 1024, 16
local STRIDE = BUCKETS + 2
local LOG_MIN = math.log(0.001)
local MULT = (BUCKETS - 1) / (math.log(100000) - LOG_MIN)

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } perflab_timespec;
int clock_gettime(int clk_id, perflab_timespec *tp);
int open(const char *path, int flags);
void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);
int close(int fd);
]]

local O_RDWR, PROT_RW, MAP_SHARED, CLOCK_MONOTONIC = 2, 3, 1, 1
local path = os.getenv("PERFLAB_TURNS")
local fd = ffi.C.open(path, O_RDWR)
assert(fd >= 0, "perflab: cannot open " .. path)
local map = ffi.C.mmap(nil, tonumber(os.getenv("PERFLAB_TURNS_BYTES")), PROT_RW, MAP_SHARED, fd, 0)
ffi.C.close(fd)
assert(ffi.cast("intptr_t", map) ~= -1, "perflab: cannot map " .. path)
local shared = ffi.cast("volatile double *", map)

local ts = ffi.new("perflab_timespec")
local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local inner = event
local base, sum_at, spanned_at

-- one argument, not `...`: a vararg function called from C runs about 100 ns slower an event
function event(thread_id)
  if base == nil then
    base = HEADER + sysbench.tid * STRIDE
    sum_at, spanned_at = base + BUCKETS, base + BUCKETS + 1
  end
  local t0 = now_ms()
  inner(thread_id)
  local t1 = now_ms()
  -- read after the event only. A turn number read before the event into a local and compared
  -- after it never found an event spanned (tests/integration/test_turn_latency.py): the x64
  -- JIT can fuse a load into its one use, past the calls in between (as in LuaJIT issue 1117).
  if shared[0] > t0 then
    shared[spanned_at] = shared[spanned_at] + 1
    return
  end
  local ms = t1 - t0
  local i = 0
  if ms > 0 then
    i = math.floor((math.log(ms) - LOG_MIN) * MULT + 0.5)
    if i < 0 then i = 0 elseif i >= BUCKETS then i = BUCKETS - 1 end
  end
  shared[base + i] = shared[base + i] + 1
  shared[sum_at] = shared[sum_at] + ms
end

-- sysbench's reporting thread (its own Lua state, which loads this file too) calls this once a
-- report interval with the counts since its last report (none are lost while it is stopped):
-- their sums give the queries per event of the run. The report is printed as sysbench's own C
-- report prints it without a hook (sysbench_output's parsers read it): its Lua
-- sysbench.report_default differs ("err/s 0.00", no colon) and, at a --rate, leaves out the
-- "queue length" line that gives the backlog (workloads/rate.py). Each line is one write: LuaJIT's
-- print writes its text and its newline in two calls, and sysbench's main thread, printing its
-- final summary meanwhile, can put a line of its own between them (a likely cause of the one run of
-- bench/fixed_rate.py, 2026-11-29, whose summary parsed without its latency histogram).
local function line(text)
  io.stdout:write(text .. "\n")
end

function sysbench.hooks.report_intermediate(stat)
  shared[5] = shared[5] + stat.reads
  shared[6] = shared[6] + stat.writes
  shared[7] = shared[7] + stat.other
  shared[8] = shared[8] + stat.events
  local seconds = stat.time_interval
  line(string.format("[ %.0fs ] thds: %u tps: %4.2f qps: %4.2f (r/w/o: %4.2f/%4.2f/%4.2f) " ..
                        "lat (ms,%u%%): %4.2f err/s: %4.2f reconn/s: %4.2f",
                      stat.time_total, stat.threads_running, stat.events / seconds,
                      (stat.reads + stat.writes + stat.other) / seconds, stat.reads / seconds,
                      stat.writes / seconds, stat.other / seconds, sysbench.opt.percentile,
                      stat.latency_pct * 1000, stat.errors / seconds, stat.reconnects / seconds))
  if tonumber(sysbench.opt.rate) > 0 then
    line(string.format("[ %.0fs ] queue length: %u, concurrency: %u", stat.time_total,
                        tonumber(stat.queue_length), tonumber(stat.concurrency)))
  end
end
