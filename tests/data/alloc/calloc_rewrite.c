/*
 * Reference report 000's mechanism: gcc turns `p = malloc(n); memset(p, 0, n)` into
 * `p = calloc(n, 1)` (gcc >= 5 at -O2; -fno-builtin-malloc keeps malloc + memset), and an
 * allocator may serve a large calloc with fresh zeroed pages (mmap, or madvise(MADV_DONTNEED)
 * of pages it had), where malloc + memset reuses pages already mapped: every call then takes
 * a minor page fault per page it touches.
 *
 * zeroed_buffer() below is that source, as a sort buffer is allocated: 2 MiB, zeroed, used,
 * freed, once per query. Built twice (tests/integration/test_calloc_rewrite.py):
 *   cc -O2 calloc_rewrite.c                      -> zeroed_buffer calls calloc
 *   cc -O2 -fno-builtin-malloc calloc_rewrite.c  -> zeroed_buffer calls malloc and memset
 *
 * Usage: calloc_rewrite CALLS [THREADS]. Prints one line:
 *   calls=N warmup=W threads=T minflt=F ns_per_call=X
 * with F the minor faults (getrusage RUSAGE_SELF) of the timed loop only: every thread makes
 * WARMUP untimed calls first, so the allocator's one-time set-up is not counted (glibc mmaps the
 * first 2 MiB block, raises its mmap threshold when it is freed, and grows its heap for the
 * second).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define SIZE (2 << 20)
#define WARMUP 3

static volatile unsigned long sink;
static int calls_per_thread;
static pthread_barrier_t ready, go;

__attribute__((noinline)) char *zeroed_buffer(size_t size) {
    char *p = malloc(size);
    if (p) memset(p, 0, size);
    return p;
}

static void use_once(void) {
    char *p = zeroed_buffer(SIZE);
    if (!p) abort();
    for (size_t i = 0; i < SIZE; i += 4096) sink += (unsigned char)p[i]; /* reads the zeroes */
    free(p);
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < WARMUP; i++) use_once();
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    for (int i = 0; i < calls_per_thread; i++) use_once();
    return NULL;
}

static long minflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

int main(int argc, char **argv) {
    calls_per_thread = argc > 1 ? atoi(argv[1]) : 1000;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    pthread_t tid[64];
    if (calls_per_thread < 1 || threads < 1 || threads > 64) return 2;
    pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, worker, NULL);
    pthread_barrier_wait(&ready);
    struct timespec t0, t1;
    long faults = minflt();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_barrier_wait(&go);
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    faults = minflt() - faults;
    long calls = (long)calls_per_thread * threads;
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)calls;
    printf("calls=%ld warmup=%d threads=%d minflt=%ld ns_per_call=%.0f\n", calls, WARMUP, threads, faults, ns);
    return 0;
}
