#!/usr/bin/sysbench
-- oltp_read_only with a synthetic warm-up: for its first --ramp-seconds, every transaction
-- is followed by a pause of 3 x (1 - elapsed/ramp) x its own duration, so throughput starts at
-- about a quarter of the steady rate and climbs to it, steepest at the end. Used by the integration test of
-- warm-up detection (a warm-up that runs into the measured window must be caught).
-- --ramp-events=N instead: a pause of 2 ms after each transaction that shrinks to none over a
-- thread's first N transactions, a climb in the client's own running time, which stopping the
-- client between turns (design = "interleaved") does not distort as it does the timed ramp's
-- pause, which is proportional to a duration that can hold a stop.
-- --pace=N instead of the timed pause: each thread keeps a schedule of its own, N transactions a
-- second, a quarter of that at its start climbing linearly to all of it over --ramp-seconds.
-- A thread ahead of its schedule sleeps; one behind it (a busy machine, a pause of the VM) starts
-- the schedule again from now, so it never bursts to catch up. The series then has the shape
-- the options give it whatever else runs beside it, as long as the machine can serve N a thread.

dofile("/usr/share/sysbench/oltp_read_only.lua")

sysbench.cmdline.options.ramp_seconds = {"seconds over which throughput climbs to its steady rate", 0}
sysbench.cmdline.options.fail_nth = {"fail the run that is the Nth to start with this --fail-file (counted in the file)", 0}
sysbench.cmdline.options.fail_file = {"the file that counts the runs for --fail-nth", ""}
sysbench.cmdline.options.ramp_events = {"transactions a thread over which a 2 ms pause shrinks to none", 0}
sysbench.cmdline.options.pace = {"transactions a second a thread, on an absolute schedule (0: as fast as it can)", 0}

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } perflab_timespec;
int clock_gettime(int clock, perflab_timespec *ts);
int usleep(unsigned int usec);
]]

local function now()
   local ts = ffi.new("perflab_timespec")
   ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local oltp_thread_init, oltp_event = thread_init, event
local started, due
local done = 0

function thread_init()
   if sysbench.tid == 0 and sysbench.opt.fail_nth > 0 then
      -- a failure of one cell of a variant whose other cells run well (the retry of failures)
      local f = io.open(sysbench.opt.fail_file, "r")
      local runs = (f and tonumber(f:read("*a")) or 0) + 1
      if f then f:close() end
      f = io.open(sysbench.opt.fail_file, "w")
      f:write(tostring(runs))
      f:close()
      if runs == sysbench.opt.fail_nth then
         error("ramp.lua: failing run " .. runs .. " on purpose (--fail-nth)")
      end
   end
   oltp_thread_init()
   started = now()
   due = started
end

-- the pace at `elapsed` seconds into the thread's run: a quarter of --pace at the start, all of it
-- from --ramp-seconds on
local function pace_at(elapsed)
   local ramp = sysbench.opt.ramp_seconds
   local share = (ramp > 0 and elapsed < ramp) and (0.25 + 0.75 * elapsed / ramp) or 1
   return sysbench.opt.pace * share
end

function event()
   if sysbench.opt.pace > 0 then
      local t = now()
      if due > t then
         ffi.C.usleep(math.floor((due - t) * 1e6))
      else
         due = t  -- behind the schedule: start it again from now, no burst
      end
      oltp_event()
      due = due + 1 / pace_at(due - started)
      return
   end
   local begin = now()
   oltp_event()
   local ramp = sysbench.opt.ramp_seconds
   local elapsed = begin - started
   if ramp > 0 and elapsed < ramp then
      ffi.C.usleep(math.floor((now() - begin) * 3 * (1 - elapsed / ramp) * 1e6))
   end
   local events = sysbench.opt.ramp_events
   if events > 0 and done < events then
      ffi.C.usleep(math.floor(2000 * (1 - done / events)))
   end
   done = done + 1
end
