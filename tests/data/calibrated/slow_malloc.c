/*
 * slow_malloc.so: a calibrated slowdown for testing perflab's sensitivity (issue 12, item 6).
 *
 * Preloaded into the server as a variant's `preload`, it makes every malloc, calloc and
 * realloc (and so every C++ operator new, which calls malloc) burn a fixed number of
 * nanoseconds of CPU before doing its work, then calls glibc's own allocator. The number comes
 * from the environment, so one library serves every setting:
 *
 *     [variants.effect]
 *     none    = {}
 *     slow200 = { preload = "/abs/path/slow_malloc.so", env = { PERFLAB_SLOW_MALLOC_NS = "200" } }
 *
 * The burn is a calibrated loop of empty iterations, not a busy-wait on the clock: on this VM
 * clock_gettime(CLOCK_MONOTONIC) costs about 100 ns a call, too coarse for 100 ns settings, and
 * a wall-clock deadline burns less CPU whenever the thread is preempted during it (a loaded
 * machine would shrink the effect). The loop's speed is measured in the thread's own CPU time
 * (CLOCK_THREAD_CPUTIME_ID, which preemption does not advance): first in the constructor, the
 * fastest of 15 runs of 2^20 iterations (about 0.5 ms each); then, for settings of 2 us and
 * more, every 16th call times its own burn and moves the speed an eighth of the way to what it
 * saw. So each call burns N ns of the CPU time it runs in: a start-up speed alone was taken in
 * 7.5 ms, often with the other vCPU idle, and the calls then burned 0.93x to 2.1x of N in the
 * measurement windows of one experiment run eight times (2026-11-30), while the server's own
 * CPU a transaction moved under 10%; timed, 1.06x-1.09x in four. Below 2 us a burn is too short to time (the clock read
 * costs about a tenth of it) and keeps the start-up speed: N ns worth of work, which on a busy
 * machine takes more CPU time, like any code (1.0-1.35x measured at load averages of 5-12 on
 * 2 vCPUs). Unset, 0 or unparsable: no burn and no calibration (a thin wrapper). Values are
 * clamped to 1 ms. free() is not slowed: the effect is "N ns per allocation", which calls per
 * transaction (perflab's [observe] alloc) turn into a nominal cost per transaction
 * (bench/archive/calibrated_effect.py).
 *
 * glibc's __libc_malloc, __libc_calloc and __libc_realloc are called directly (exported by
 * every glibc), so no dlsym is needed and nothing allocates before the real allocator is there.
 * Built by tests/data/calibrated/build.py: cc -O2 -fPIC -shared.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);

static long long burn_ns;     /* 0 until the constructor has read the environment */
static double loops_per_ns;   /* the loop's speed: the constructor's, then the timed calls' */
static unsigned long burns;   /* calls that burned, to time every TIME_EVERY-th */

#define TIME_FROM_NS 2000     /* a burn this long is timed (the clock read is a tenth of it) */
#define TIME_EVERY 16

static inline void spin(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile("" ::: "memory"); /* one iteration the compiler cannot remove */
}

static long long cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void calibrate(void)
{
    const unsigned long n = 1UL << 20;
    long long best = 0;
    for (int i = 0; i < 15; i++) {
        long long start = cpu_ns();
        spin(n);
        long long took = cpu_ns() - start;
        if (took > 0 && (best == 0 || took < best))
            best = took;
    }
    loops_per_ns = best > 0 ? (double)n / (double)best : 1.0;
}

__attribute__((constructor)) static void slow_malloc_init(void)
{
    const char *text = getenv("PERFLAB_SLOW_MALLOC_NS");
    char *end = NULL;
    long long ns = text ? strtoll(text, &end, 10) : 0;
    if (!text || end == text || *end != '\0' || ns < 0)
        ns = 0;
    if (ns > 0)
        calibrate();
    burn_ns = ns > 1000000 ? 1000000 : ns;
}

static inline void burn(void)
{
    if (burn_ns <= 0)
        return;
    double speed;
    __atomic_load(&loops_per_ns, &speed, __ATOMIC_RELAXED);
    unsigned long n = (unsigned long)(burn_ns * speed);
    if (burn_ns < TIME_FROM_NS || __atomic_fetch_add(&burns, 1, __ATOMIC_RELAXED) % TIME_EVERY != 0) {
        spin(n);
        return;
    }
    long long start = cpu_ns();
    spin(n);
    long long took = cpu_ns() - start;
    if (took > 0) {
        double next = speed + ((double)n / (double)took - speed) / 8;
        __atomic_store(&loops_per_ns, &next, __ATOMIC_RELAXED);
    }
}

void *malloc(size_t size)
{
    burn();
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    burn();
    return __libc_calloc(n, size);
}

void *realloc(void *ptr, size_t size)
{
    burn();
    return __libc_realloc(ptr, size);
}

/* Not slowed; defined so that the four calls come from one library (perflab's allocation
 * counter, [observe] alloc, forwards to the preload and checks that it defines all four). */
void free(void *ptr)
{
    __libc_free(ptr);
}

/* How many nanoseconds this copy burns per call (for a test that dlopens it). */
long long slow_malloc_ns(void)
{
    return burn_ns;
}
