/*
 * perflab_alloc.so: counts what a process asks of its allocator, by call and log2 size class.
 *
 * Loaded first in LD_PRELOAD, before the variant's allocator (glibc, jemalloc, tcmalloc,
 * mimalloc, a path): every call is forwarded with RTLD_NEXT to whatever comes next, so the
 * allocator's behaviour is unchanged; only counters are added. C++ operator new/delete are
 * interposed too: the preloaded allocators export their own, and without ours `new` would
 * bypass malloc and go uncounted. libstdc++'s operator new calls malloc, and new[] calls new: a flag in
 * TLS keeps that inner call from being counted twice.
 *
 * Counters live in a file perflab creates and sizes on tmpfs (PERFLAB_ALLOC_FILE), mapped
 * shared: a header and one slot per thread. A thread takes a slot on its first call (an atomic
 * increment) and is then the only writer of it, so counting is two relaxed adds with no lock
 * and no contention; perflab sums the slots at the window's start and end (format below,
 * perflab-alloc/1, read by alloc.py). Threads beyond the last slot share the overflow slot
 * (slot 0) with atomic adds, and the header counts them.
 *
 * Sampled stacks: one allocation in every `period` bytes on average (a Poisson process over
 * the bytes each thread allocates: exponential gaps, as tcmalloc's heap profiler), unwound with
 * glibc's backtrace() only when sampled, into a ring of records perflab symbolizes at the
 * window's end. A record holds the op, the size and the return addresses; perflab weighs it by
 * 1 / P(sampled) = 1 / (1 - exp(-size/period)).
 *
 * Layout (little-endian, 8-byte words), written by perflab (create() in __init__.py); the shim
 * checks magic, version, ops and classes and fills in pid and owner:
 *   header (256 bytes): magic "PLALLOC1", version 2, slots, ops, classes, slots_used,
 *                       overflow_threads, pid, sample_capacity, samples_used, samples_dropped,
 *                       period, max_depth, owner, extra_copies, foreign_processes
 *   slot i (i = 0..slots-1): calls[ops][classes] then bytes[ops][classes], uint64
 *   sample j (j = 0..sample_capacity-1): op, size, depth, pcs[max_depth]
 * ops: 0 malloc, 1 calloc, 2 realloc, 3 free, 4 memalign (posix_memalign, aligned_alloc,
 * valloc, pvalloc too), 5 new (every operator new), 6 delete (every operator delete).
 * class c holds sizes in [2^(c-1), 2^c) (class 0: size 0); free and delete count size 0
 * unless the caller passes it (sized delete).
 *
 * dlsym may allocate (glibc's dlerror buffer): while the real functions are being looked up,
 * allocations come from a static arena, and free of such a pointer is ignored.
 *
 * One copy in one process counts: the first to map the file claims it (owner: a word naming the
 * process image and the copy). A second copy of this library in the same process (loaded twice:
 * /etc/ld.so.preload, a preload that links against it) would count every call again, since the
 * first forwards to it: it counts nothing and adds 1 to extra_copies, which perflab reports as
 * an error. Another process that inherited the environment (a child the server starts) counts
 * nothing either and adds 1 to foreign_processes. The same pid with a new image is the server
 * itself after exec (perflab starts it through setpriv): it takes the claim over.
 *
 * A child forked without exec (a PostgreSQL backend, forked by its postmaster) keeps the mapping
 * and counts too, as part of the server: it takes a slot of its own on its first call (the
 * forking thread's slot is reset in the child: two processes writing one slot with plain stores
 * would lose counts), and its sampling state is drawn anew. perflab sums every slot, so the
 * counts are the whole process tree's, those of children that exited included.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OPS 7
#define CLASSES 48
#define MAGIC 0x31434f4c4c414c50ULL /* "PLALLOC1" */

enum { OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_FREE, OP_MEMALIGN, OP_NEW, OP_DELETE };

#define MAX_DEPTH 48

struct header {
    uint64_t magic, version, slots, ops, classes;
    _Atomic uint64_t slots_used, overflow_threads;
    uint64_t pid, sample_capacity;
    _Atomic uint64_t samples_used, samples_dropped;
    uint64_t period, max_depth;
    _Atomic uint64_t owner, extra_copies, foreign_processes;
    _Atomic uint64_t paused; /* nonzero: calls are forwarded, not counted (bench/ toggles it) */
    uint64_t reserved[15];
};

/* perflab recognizes this library by this symbol (perflab/allocators.py: TRACER_SYMBOL) */
__attribute__((visibility("default"))) const char perflab_alloc_format[] = "perflab-alloc/1";

struct sample {
    uint64_t op, size, depth;
    uint64_t pcs[MAX_DEPTH];
};

struct slot {
    _Atomic uint64_t calls[OPS][CLASSES];
    _Atomic uint64_t bytes[OPS][CLASSES];
};

static struct header *region;
static struct slot *slots;
static struct sample *samples;
static _Atomic int region_state; /* 0 not tried, 1 mapping, 2 mapped, 3 none */

/* initial-exec: a dynamic TLS block would be allocated by malloc, inside malloc */
static __thread struct slot *my_slot __attribute__((tls_model("initial-exec")));
static __thread int in_new __attribute__((tls_model("initial-exec")));
static __thread int in_sample __attribute__((tls_model("initial-exec")));
static __thread int64_t until_sample __attribute__((tls_model("initial-exec"))); /* bytes */
static __thread uint64_t rng __attribute__((tls_model("initial-exec"))); /* inside our operator new: its malloc is not counted again */

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static void *(*real_memalign)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);

/* ------------------------------------------------------------------ bootstrap arena */

static char arena[64 * 1024] __attribute__((aligned(64)));
static _Atomic size_t arena_used;
static _Atomic int resolving;

static void *arena_alloc(size_t size) {
    size_t need = (size + 63) & ~(size_t)63;
    size_t at = atomic_fetch_add(&arena_used, need);
    return at + need <= sizeof(arena) ? arena + at : NULL;
}

static int from_arena(const void *p) { return (const char *)p >= arena && (const char *)p < arena + sizeof(arena); }

static void resolve(void) {
    if (real_malloc) return;
    atomic_store(&resolving, 1);
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_valloc = dlsym(RTLD_NEXT, "valloc");
    real_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    atomic_store(&resolving, 0);
}

/* ------------------------------------------------------------------ counters */

/* Is this copy, in this process, the one that counts? (see the top of this file) */
static int claim(struct header *h) {
    const uint64_t *random = (const uint64_t *)getauxval(AT_RANDOM); /* new at every exec */
    uint32_t image = (uint32_t)((random ? *random : 0) ^ (uint64_t)getpid());
    uintptr_t here = (uintptr_t)&region_state; /* differs between copies */
    uint64_t mine = ((uint64_t)image << 32) | (uint32_t)(here ^ (here >> 32));
    uint64_t owner = atomic_load(&h->owner);
    for (;;) {
        if (owner && (uint32_t)(owner >> 32) == image) {
            atomic_fetch_add(&h->extra_copies, 1);
            return 0;
        }
        if (owner && h->pid != (uint64_t)getpid()) {
            atomic_fetch_add(&h->foreign_processes, 1);
            return 0;
        }
        if (atomic_compare_exchange_weak(&h->owner, &owner, mine)) break;
    }
    h->pid = (uint64_t)getpid();
    return 1;
}

/* In a forked child (see the top of this file): a slot and a sampling state of its own. */
static void forked(void) {
    my_slot = NULL;
    rng = 0;
    until_sample = 0;
}

static void map_region(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&region_state, &expected, 1)) return;
    const char *path = getenv("PERFLAB_ALLOC_FILE");
    int fd = path ? open(path, O_RDWR | O_CLOEXEC) : -1;
    struct stat st;
    void *map = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct header))
        map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    struct header *h = map;
    if (map == MAP_FAILED || h->magic != MAGIC || h->version != 2 || h->ops != OPS || h->classes != CLASSES ||
        h->max_depth != MAX_DEPTH || h->slots < 1 ||
        sizeof(struct header) + h->slots * sizeof(struct slot) + h->sample_capacity * sizeof(struct sample) >
            (uint64_t)st.st_size) {
        if (map != MAP_FAILED) munmap(map, (size_t)st.st_size);
        atomic_store(&region_state, 3); /* not ours to write: count nothing, change nothing */
        return;
    }
    if (!claim(h)) {
        munmap(map, (size_t)st.st_size);
        atomic_store(&region_state, 3);
        return;
    }
    slots = (struct slot *)((char *)map + sizeof(struct header));
    samples = (struct sample *)((char *)slots + h->slots * sizeof(struct slot));
    region = h;
    pthread_atfork(NULL, NULL, forked);
    atomic_store(&region_state, 2);
}

static struct slot *slot(void) {
    if (my_slot) return my_slot;
    if (atomic_load(&region_state) == 0) map_region();
    if (atomic_load(&region_state) != 2) return NULL;
    uint64_t i = atomic_fetch_add(&region->slots_used, 1); /* perflab starts it at 1: slot 0 is shared */
    if (i >= region->slots) {
        atomic_fetch_add(&region->overflow_threads, 1);
        i = 0;
    }
    my_slot = &slots[i];
    return my_slot;
}

static inline int size_class(size_t size) {
    int c = size ? 64 - __builtin_clzll((unsigned long long)size) : 0;
    return c < CLASSES ? c : CLASSES - 1;
}

static uint64_t next_random(void) { /* xorshift64*, seeded per thread */
    if (!rng) rng = (uint64_t)(uintptr_t)&rng ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dULL;
}

static int64_t next_gap(uint64_t period) { /* exponential with mean `period` */
    double u = ((double)(next_random() >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    return (int64_t)(-log(u) * (double)period) + 1;
}

static void take_sample(int op, size_t size) {
    uint64_t j = atomic_fetch_add(&region->samples_used, 1);
    if (j >= region->sample_capacity) {
        atomic_fetch_add(&region->samples_dropped, 1);
        return;
    }
    struct sample *rec = &samples[j];
    in_sample = 1; /* backtrace may allocate (the first time, it loads libgcc_s) */
    int depth = backtrace((void **)rec->pcs, MAX_DEPTH);
    in_sample = 0;
    rec->op = (uint64_t)op;
    rec->size = size;
    atomic_thread_fence(memory_order_release);
    rec->depth = depth > 0 ? (uint64_t)depth : 0;
}

static inline void maybe_sample(int op, size_t size) {
    uint64_t period = region->period;
    if (!period || in_sample || op == OP_FREE || op == OP_DELETE) return;
    if (until_sample == 0) until_sample = next_gap(period); /* this thread's first allocation */
    until_sample -= (int64_t)size;
    if (until_sample > 0) return;
    until_sample = next_gap(period);
    take_sample(op, size);
}

static inline void count(int op, size_t size) {
    if (region && atomic_load_explicit(&region->paused, memory_order_relaxed)) return;
    struct slot *s = slot();
    if (!s) return;
    maybe_sample(op, size);
    int c = size_class(size);
    if (s == &slots[0]) {
        atomic_fetch_add_explicit(&s->calls[op][c], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->bytes[op][c], size, memory_order_relaxed);
    } else { /* the only writer: a plain load and store, still atomic for the reader */
        atomic_store_explicit(&s->calls[op][c], atomic_load_explicit(&s->calls[op][c], memory_order_relaxed) + 1,
                              memory_order_relaxed);
        atomic_store_explicit(&s->bytes[op][c], atomic_load_explicit(&s->bytes[op][c], memory_order_relaxed) + size,
                              memory_order_relaxed);
    }
}

/* backtrace() loads libgcc_s on its first call: do that now, not inside someone's malloc */
__attribute__((constructor)) static void load_unwinder(void) {
    void *pcs[2];
    in_sample = 1;
    backtrace(pcs, 2);
    in_sample = 0;
}

/* ------------------------------------------------------------------ C allocator */

void *malloc(size_t size) {
    if (!real_malloc) {
        if (atomic_load(&resolving)) return arena_alloc(size);
        resolve();
    }
    if (!in_new) count(OP_MALLOC, size);
    return real_malloc(size);
}

void *calloc(size_t n, size_t size) {
    if (!real_calloc) {
        if (atomic_load(&resolving)) {
            void *p = arena_alloc(n * size);
            return p; /* the arena is static: already zero */
        }
        resolve();
    }
    count(OP_CALLOC, n * size);
    return real_calloc(n, size);
}

void *realloc(void *ptr, size_t size) {
    if (from_arena(ptr)) {
        void *p = malloc(size);
        if (p) memcpy(p, ptr, size < sizeof(arena) ? size : sizeof(arena));
        return p;
    }
    if (!real_realloc) resolve();
    count(OP_REALLOC, size);
    return real_realloc(ptr, size);
}

void free(void *ptr) {
    if (!ptr || from_arena(ptr)) return;
    if (!real_free) resolve();
    if (!in_new) count(OP_FREE, 0);
    real_free(ptr);
}

void *memalign(size_t alignment, size_t size) {
    if (!real_memalign) resolve();
    count(OP_MEMALIGN, size);
    return real_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    if (!real_posix_memalign) resolve();
    if (!in_new) count(OP_MEMALIGN, size);
    return real_posix_memalign(out, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    if (!real_aligned_alloc) resolve();
    if (!in_new) count(OP_MEMALIGN, size);
    return real_aligned_alloc(alignment, size);
}

void *valloc(size_t size) {
    if (!real_valloc) resolve();
    count(OP_MEMALIGN, size);
    return real_valloc(size);
}

void *pvalloc(size_t size) {
    if (!real_pvalloc) resolve();
    count(OP_MEMALIGN, size);
    return real_pvalloc(size);
}

/* ------------------------------------------------------------------ C++ operator new/delete */
/* Each forwards to the next library's own operator (jemalloc's, tcmalloc's, or libstdc++'s,
 * which calls malloc); looked up on first use, since libstdc++ may load after us. */

#define NEXT(var, name) \
    static void *var;   \
    if (!var) var = dlsym(RTLD_NEXT, name)

typedef struct { int unused; } nothrow_t; /* only its address is passed on */

#define NEW(mangled, params, args)               \
    void *mangled params {                          \
        NEXT(next, #mangled);                       \
        if (!in_new) count(OP_NEW, size);           \
        in_new++;                                   \
        void *p = ((void *(*) params)next) args;    \
        in_new--;                                   \
        return p;                                   \
    }

NEW(_Znwm, (size_t size), (size))
NEW(_Znam, (size_t size), (size))
NEW(_ZnwmRKSt9nothrow_t, (size_t size, const nothrow_t *tag), (size, tag))
NEW(_ZnamRKSt9nothrow_t, (size_t size, const nothrow_t *tag), (size, tag))
NEW(_ZnwmSt11align_val_t, (size_t size, size_t align), (size, align))
NEW(_ZnamSt11align_val_t, (size_t size, size_t align), (size, align))

#define DELETE(mangled, params, args, size_expr)                   \
    void mangled params {                                          \
        NEXT(next, #mangled);                                      \
        if (!ptr) return;                                          \
        if (!in_new) count(OP_DELETE, size_expr);                             \
        in_new++;                                                  \
        ((void (*) params)next) args;                              \
        in_new--;                                                  \
    }

DELETE(_ZdlPv, (void *ptr), (ptr), 0)
DELETE(_ZdaPv, (void *ptr), (ptr), 0)
DELETE(_ZdlPvm, (void *ptr, size_t size), (ptr, size), size)
DELETE(_ZdaPvm, (void *ptr, size_t size), (ptr, size), size)
DELETE(_ZdlPvRKSt9nothrow_t, (void *ptr, const nothrow_t *tag), (ptr, tag), 0)
DELETE(_ZdaPvRKSt9nothrow_t, (void *ptr, const nothrow_t *tag), (ptr, tag), 0)
DELETE(_ZdlPvSt11align_val_t, (void *ptr, size_t align), (ptr, align), 0)
DELETE(_ZdaPvSt11align_val_t, (void *ptr, size_t align), (ptr, align), 0)
DELETE(_ZdlPvmSt11align_val_t, (void *ptr, size_t size, size_t align), (ptr, size, align), size)
DELETE(_ZdaPvmSt11align_val_t, (void *ptr, size_t size, size_t align), (ptr, size, align), size)
