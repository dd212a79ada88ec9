// Waiting for the next request by polling briefly before sleeping: /dev/fuse before read(),
// and a ring's completion queue before io_uring_enter() (Uring.c). A request that finds a
// worker asleep pays for waking it (a third of a round trip here); a caller that issues
// requests back to back (a lookup per path, an open per file) finds the worker that just
// answered it still polling. One worker of each transport polls at a time, and a poll that ends
// without a request makes the next ones skip polling (1, 3, 7 ... up to 63 waits), so a daemon
// whose callers pause burns almost nothing.
#include "CFuseShim.h"

#include <poll.h>
#include <stdatomic.h>
#include <time.h>

struct spinner {
    atomic_int spinning;
    atomic_uint waits_to_skip;
    atomic_uint misses;
};

static long spin_limit_ns;
static struct spinner device_spinner;
static struct spinner ring_spinner;

void pb_spin_set_limit(unsigned microseconds) {
    spin_limit_ns = (long)microseconds * 1000;
}

static long nanoseconds_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start->tv_sec) * 1000000000L + (now.tv_nsec - start->tv_nsec);
}

static int skips_this_wait(struct spinner *s) {
    unsigned left = atomic_load_explicit(&s->waits_to_skip, memory_order_relaxed);
    while (left > 0) {
        if (atomic_compare_exchange_weak_explicit(&s->waits_to_skip, &left, left - 1,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            return 1;
        }
    }
    return 0;
}

static void learn(struct spinner *s, int found) {
    if (found) {
        atomic_store_explicit(&s->misses, 0, memory_order_relaxed);
        return;
    }
    unsigned missed = atomic_load_explicit(&s->misses, memory_order_relaxed);
    if (missed < 6) missed += 1;
    atomic_store_explicit(&s->misses, missed, memory_order_relaxed);
    atomic_store_explicit(&s->waits_to_skip, (1u << missed) - 1, memory_order_relaxed);
}

// Polls `arrived` until it says yes or the limit passes, where this transport's state allows.
static void spin(struct spinner *s, int (*arrived)(void *), void *context) {
    if (spin_limit_ns <= 0 || skips_this_wait(s)) return;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&s->spinning, &idle, 1)) return;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int found = 0;
    do {
        if (arrived(context)) {
            found = 1;
            break;
        }
    } while (nanoseconds_since(&start) < spin_limit_ns);
    atomic_store(&s->spinning, 0);
    learn(s, found);
}

static int readable(void *context) {
    struct pollfd device = { .fd = *(int *)context, .events = POLLIN };
    // readable, or an error (an unmounted device) that the read will report
    return poll(&device, 1, 0) != 0;
}

void pb_spin_until_readable(int fd) {
    spin(&device_spinner, readable, &fd);
}

void pb_spin_until_completed(int (*arrived)(void *), void *ring) {
    spin(&ring_spinner, arrived, ring);
}
