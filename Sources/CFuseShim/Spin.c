// Waiting for the next request by polling the FUSE device briefly before sleeping in read().
// A request that finds a worker asleep pays for waking it (a third of a round trip here);
// a caller that issues requests back to back (a lookup per path, an open per file) finds the
// worker that just answered it still polling. One worker polls at a time, and a poll that
// ends without a request makes the next ones skip polling (1, 3, 7 ... up to 63 reads), so a
// daemon whose callers pause burns almost nothing.
#include "CFuseShim.h"

#include <poll.h>
#include <stdatomic.h>
#include <time.h>

static long spin_limit_ns;
static atomic_int spinning;
static atomic_uint reads_to_skip;
static atomic_uint misses;

void pb_spin_set_limit(unsigned microseconds) {
    spin_limit_ns = (long)microseconds * 1000;
}

static long nanoseconds_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start->tv_sec) * 1000000000L + (now.tv_nsec - start->tv_nsec);
}

static int skips_this_read(void) {
    unsigned left = atomic_load_explicit(&reads_to_skip, memory_order_relaxed);
    while (left > 0) {
        if (atomic_compare_exchange_weak_explicit(&reads_to_skip, &left, left - 1,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            return 1;
        }
    }
    return 0;
}

static void learn(int found) {
    if (found) {
        atomic_store_explicit(&misses, 0, memory_order_relaxed);
        return;
    }
    unsigned missed = atomic_load_explicit(&misses, memory_order_relaxed);
    if (missed < 6) missed += 1;
    atomic_store_explicit(&misses, missed, memory_order_relaxed);
    atomic_store_explicit(&reads_to_skip, (1u << missed) - 1, memory_order_relaxed);
}

void pb_spin_until_readable(int fd) {
    if (spin_limit_ns <= 0 || skips_this_read()) return;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&spinning, &idle, 1)) return;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int found = 0;
    do {
        struct pollfd device = { .fd = fd, .events = POLLIN };
        // readable, or an error (an unmounted device) that the read will report
        if (poll(&device, 1, 0) != 0) {
            found = 1;
            break;
        }
    } while (nanoseconds_since(&start) < spin_limit_ns);
    atomic_store(&spinning, 0);
    learn(found);
}
