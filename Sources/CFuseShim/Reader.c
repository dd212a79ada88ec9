// One worker reads the FUSE device at a time; the others wait here rather than in read().
// With several workers asleep in read(), the kernel wakes one of them for every request, the
// longest asleep first, even when the worker that answered the previous request is polling
// for the next one (Spin.c) and takes it. So the worker that reads keeps reading, and answers
// what it reads itself. One waiting worker watches it: if the reader has been busy with one
// request for a millisecond (a cold disk, a large copy-up), the watcher becomes the reader,
// so that a slow request holds up the others for a millisecond at most. The watcher sleeps
// without a deadline while the reader waits for requests, and the reader wakes it when one
// arrives only then.
#include "CFuseShim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

enum { TAKEOVER_NS = 1000000 };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watching;  // the watcher's sleep (CLOCK_MONOTONIC deadlines)
static pthread_cond_t turn;      // workers waiting to become the watcher
static pthread_t reader;
static int reader_present;
static int watcher_present;
static atomic_long busy_since;     // when the reader got the request it is answering; 0 while it reads
static atomic_int watcher_asleep;  // the watcher sleeps without a deadline

static void make_conditions(void) {
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&watching, &monotonic);
    pthread_condattr_destroy(&monotonic);
    pthread_cond_init(&turn, NULL);
}

static long now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000000000L + now.tv_nsec;
}

static void unlock(void *unused) {
    (void)unused;
    pthread_mutex_unlock(&lock);
}

// Watches the reader until this worker should read instead (the lock is held).
static void watch(void) {
    watcher_present = 1;
    while (reader_present) {
        long since = atomic_load(&busy_since);
        if (since == 0) {
            atomic_store(&watcher_asleep, 1);
            if (atomic_load(&busy_since) == 0) pthread_cond_wait(&watching, &lock);
            atomic_store(&watcher_asleep, 0);
            continue;
        }
        long left = since + TAKEOVER_NS - now_ns();
        if (left <= 0) break;
        long until = now_ns() + left;
        struct timespec deadline = { .tv_sec = until / 1000000000L, .tv_nsec = until % 1000000000L };
        pthread_cond_timedwait(&watching, &lock, &deadline);
    }
    watcher_present = 0;
    pthread_cond_signal(&turn);
}

void pb_reader_wait_for_turn(void) {
    pthread_once(&once, make_conditions);
    pthread_t self = pthread_self();
    pthread_mutex_lock(&lock);
    // libfuse cancels the workers waiting here when the session ends
    pthread_cleanup_push(unlock, NULL);
    while (reader_present && !pthread_equal(reader, self)) {
        if (watcher_present) {
            pthread_cond_wait(&turn, &lock);
        } else {
            watch();
            break;
        }
    }
    reader_present = 1;
    reader = self;
    atomic_store(&busy_since, 0);
    pthread_cleanup_pop(1);
}

void pb_reader_got_request(int nobody_waits) {
    atomic_store(&busy_since, now_ns());
    if (nobody_waits) {
        // a release: the caller went on, and its next request should not wait behind this one
        pthread_mutex_lock(&lock);
        if (watcher_present) {
            reader_present = 0;
            pthread_cond_signal(&watching);
        }
        pthread_mutex_unlock(&lock);
    } else if (atomic_load(&watcher_asleep)) {
        pthread_mutex_lock(&lock);
        pthread_cond_signal(&watching);
        pthread_mutex_unlock(&lock);
    }
}
