/* perflab's host-speed canary ([observe] host_speed, observers/host_speed.py).
 *
 * Every PERIOD_MS it spins a fixed piece of register-only work (about 1 ms on a 2023 Xeon)
 * and prints when it ended and the CPU time the work took, in the thread's own CPU clock.
 * Preemption stops that clock, so a busy guest does not change it: the CPU time per unit of
 * work rises only when the vCPU itself runs slower (a busy sibling hyperthread or core on
 * the host, a lower clock), which no counter inside a VM shows. On the 2-vCPU VM perflab is
 * developed on it varies 2-4x over minutes on an idle guest, and QPS follows it
 * (docs/methodology.md#host-speed).
 *
 * With CPUs named, one thread per CPU, pinned to it, their periods staggered: the vCPUs of
 * this VM change speed apart (10 s medians of two pinned canaries correlate at r = 0.07-0.62,
 * bench/archive/vcpu_speeds.py), and a workload on both follows both; one unpinned thread sees
 * whichever it happens to run on.
 *
 * After the spin, each period chases pointers once around a random cycle through a 1 MiB buffer
 * (8,192 loads of a cache line, each waiting for the last), timed the same way: the latency of the
 * caches and memory as this vCPU sees them. The host's other tenants slow that apart from the
 * spin (a shared last-level cache, memory bandwidth), and the workload follows both: on
 * oltp_read_only here the two together left 0.55-0.6 of the variance of a round's A/A
 * log-ratio that the spin alone leaves, out of sample, in noisy hours (a first version of 25,000
 * loads a period; this one's 8,192 have not yet been seen to help: docs/methodology.md). The verdicts weigh it in
 * only after `perflab calibrate --chase`: the server's own use of the caches moves it too
 * (docs/methodology.md#host-speed).
 *
 *   perflab-canary PERIOD_MS            ->  lines "monotonic_s work_ns -1 chase_ns", until killed
 *   perflab-canary PERIOD_MS CPU...     ->  lines "monotonic_s work_ns cpu chase_ns", one thread a CPU
 *   perflab-canary -r PERIOD_MS CPU...  ->  the same, stamped on CLOCK_REALTIME: on a server host,
 *                                           whose wall clock perflab aligns with its own (hosts/clock.py)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORK 2000000UL
#define CHASE_BYTES (1UL << 20) /* the chase's buffer: 16,384 cache lines */
#define CHASE_STEPS 8192UL      /* half way round it a period: about 1 ms here */
#define MAX_CPUS 1024

static volatile size_t sink;

/* A random cycle through the buffer's cache lines (Sattolo's shuffle): each line holds the
 * index of the next, so the loads of a chase cannot overlap. */
static size_t *cycle(size_t bytes, unsigned *seed)
{
    size_t lines = bytes / 64, *buf = aligned_alloc(64, bytes), *order = malloc(lines * sizeof *order);
    if (!buf || !order) {
        fprintf(stderr, "perflab-canary: out of memory\n");
        exit(3);
    }
    for (size_t i = 0; i < lines; i++)
        order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = (size_t)rand_r(seed) % i, t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        buf[order[i] * 8] = order[(i + 1) % lines] * 8;
    free(order);
    return buf;
}

static size_t chase(const size_t *buf, size_t steps)
{
    size_t p = 0;
    while (steps--)
        p = buf[p];
    return p;
}

static long period_ms;
static int ncpus;
static clockid_t stamp_clock = CLOCK_MONOTONIC; /* -r: CLOCK_REALTIME */
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

struct spinner {
    int cpu; /* -1: not pinned */
    int index;
};

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void nap(long ns)
{
    struct timespec pause = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&pause, NULL);
}

static void *spin(void *arg)
{
    struct spinner *me = arg;
    if (me->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(me->cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
            fprintf(stderr, "perflab-canary: cannot pin a thread to CPU %d\n", me->cpu);
            exit(3);
        }
        nap(period_ms * 1000000L * me->index / ncpus); /* staggered: one CPU at a time */
    }
    unsigned seed = 12345u + (unsigned)me->index;
    size_t *buf = cycle(CHASE_BYTES, &seed);
    for (;;) {
        double c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
        for (unsigned long i = 0; i < WORK; i++)
            __asm__ volatile("" ::: "memory");
        double c1 = seconds(CLOCK_THREAD_CPUTIME_ID);
        sink = chase(buf, CHASE_STEPS);
        double c2 = seconds(CLOCK_THREAD_CPUTIME_ID);
        pthread_mutex_lock(&out);
        int written = printf("%.6f %.0f %d %.0f\n", seconds(stamp_clock), (c1 - c0) * 1e9, me->cpu,
                             (c2 - c1) * 1e9);
        pthread_mutex_unlock(&out);
        if (written < 0)
            exit(1); /* the reader is gone */
        nap(period_ms * 1000000L);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && argv[1][0] == '-' && argv[1][1] == 'r' && argv[1][2] == '\0') {
        stamp_clock = CLOCK_REALTIME;
        argv++;
        argc--;
    }
    period_ms = argc >= 2 ? atol(argv[1]) : 0;
    if (period_ms <= 0 || period_ms > 60000 || argc - 2 > MAX_CPUS) {
        fprintf(stderr, "usage: perflab-canary [-r] PERIOD_MS (1-60000) [CPU ...]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ncpus = argc - 2;
    if (ncpus == 0) {
        struct spinner one = {-1, 0};
        spin(&one);
    }
    static struct spinner spinners[MAX_CPUS];
    pthread_t threads[MAX_CPUS];
    for (int i = 0; i < ncpus; i++) {
        char *end;
        long cpu = strtol(argv[i + 2], &end, 10);
        if (*end || cpu < 0 || cpu >= CPU_SETSIZE) {
            fprintf(stderr, "perflab-canary: not a CPU number: %s\n", argv[i + 2]);
            return 2;
        }
        spinners[i] = (struct spinner){(int)cpu, i};
        if (pthread_create(&threads[i], NULL, spin, &spinners[i]) != 0) {
            fprintf(stderr, "perflab-canary: cannot start a thread\n");
            return 3;
        }
    }
    for (int i = 0; i < ncpus; i++)
        pthread_join(threads[i], NULL);
    return 0;
}
