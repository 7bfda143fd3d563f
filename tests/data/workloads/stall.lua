#!/usr/bin/sysbench
-- oltp_point_select with a synthetic client-side stall: from --stall-at seconds after a thread
-- starts, for --stall-seconds, every thread sleeps in usleep() instead of querying, so QPS drops
-- to nothing and the client's wall-clock stacks sit in clock_nanosleep. Used by the integration
-- test of stall profiles (the stall's stacks must show what grows during it).

dofile("/usr/share/sysbench/oltp_point_select.lua")

sysbench.cmdline.options.stall_at = {"seconds after a thread's start when the stall begins", 0}
sysbench.cmdline.options.stall_seconds = {"how long the stall lasts (0: none)", 0}

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } perflab_stall_timespec;
int clock_gettime(int clock, perflab_stall_timespec *ts);
int usleep(unsigned int usec);
]]

local function now()
   local ts = ffi.new("perflab_stall_timespec")
   ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local oltp_thread_init, oltp_event = thread_init, event
local started

function thread_init()
   oltp_thread_init()
   started = now()
end

function event()
   local at, length = sysbench.opt.stall_at, sysbench.opt.stall_seconds
   local elapsed = now() - started
   if length > 0 and elapsed >= at and elapsed < at + length then
      ffi.C.usleep(math.floor((at + length - elapsed) * 1e6))
   end
   oltp_event()
end
