// FUSE over io_uring (Linux 6.14 and later, protocol 7.42), done by the daemon itself: libfuse
// 3.14 predates it. Where the fuse module's enable_uring parameter is on, the kernel offers it
// in INIT; the INIT reply asks for it (Passthrough.c), and once that reply is out, the ring
// threads start here.
//
// Each thread owns one io_uring (128-byte SQEs, for the command area) and one ring entry of one
// queue. The kernel has a queue per possible CPU, puts each request on the queue of the CPU its
// caller runs on, and switches from /dev/fuse to the rings once every queue has an entry. An
// entry is a header buffer and a payload buffer registered with the kernel; a request's
// completion wakes the thread, which puts the request together as read(/dev/fuse) gives it
// (in-header, the operation's own struct, payload) in room kept before the payload buffer, so
// the payload is not copied; hands it to libfuse (fuse_session_process_buf), which runs the
// handler on this thread; catches the reply on its way out (the session's writev, on this
// thread) into the entry's buffers; and answers with COMMIT_AND_FETCH, which also asks for the
// next request. One entry per thread: a thread busy with a long request (a copy-up, an
// invalidation waiting on the kernel) holds up no other request, which the kernel gives to a
// free entry of its queue, as libfuse's loop gives each request a thread.
//
// Each ring has one thread, which made it and alone submits to it (SINGLE_ISSUER), and the
// kernel's work for it (copying a request into the entry, in the thread's context) is deferred
// until the thread asks for completions (DEFER_TASKRUN) rather than interrupting it. Before it
// sleeps, a thread that has answered polls for the next request as /dev/fuse's workers do
// (Spin.c, -o spin=): measured side by side here (7 interleaved rounds, medians), statfs 20,000
// times took 0.337 s over /dev/fuse, 0.335 s over plain rings, 0.304 s so; 5,000 opens 0.290,
// 0.411 and 0.313 s; 20,000 missing names 0.416, 0.484 and 0.409 s (interrupting task work
// with polling: 0.293, 0.374, 0.387 s).
//
// FORGET, INTERRUPT and notifications stay on /dev/fuse, which libfuse's loop keeps reading.
// The threads end when the connection ends (their entries complete with ENOTCONN) or when
// pb_uring_stop asks (an eventfd every ring polls). They block SIGHUP, SIGINT and SIGTERM, so
// that those reach a thread of libfuse's loop, which ends it (a ring thread would only mark
// the session ended, and the loop would go on waiting).
#include "CFuseShim.h"
#include "Request.h"
#include "Uring.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

// The ring's structures (include/uapi/linux/fuse.h, 7.42).
struct pb_ring_in_out {
    uint64_t flags;
    uint64_t commit_id;   // the request's unique, given back with its reply
    uint32_t payload_sz;  // bytes in the payload buffer, either way
    uint32_t padding;
    uint64_t reserved;
};
struct pb_ring_header {
    char in_out[128];  // a request's fuse_in_header, or its reply's fuse_out_header
    char op_in[128];   // the operation's own struct (the request's first argument)
    struct pb_ring_in_out ring;
};
struct pb_ring_command {  // in the 80-byte command area of the SQE
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};
struct pb_reply_header {
    uint32_t len;
    int32_t error;
    uint64_t unique;
};
enum {
    pb_RING_REGISTER = 1,
    pb_RING_COMMIT_AND_FETCH = 2,
    pb_REQUEST_HEADER_SIZE = 40,  // fuse_in_header
    pb_ROOM = 4096,               // kept before the payload buffer for the request's headers
    pb_MIN_PAYLOAD = 8192,        // FUSE_MIN_READ_BUFFER
    pb_REGISTER_TRIES = 5000,     // 1 ms apart, while the kernel has not processed INIT
    TAG_ENTRY = 1,
    TAG_STOP = 2,
};

struct ring_worker {
    pthread_t thread;
    int started;
    unsigned qid;
    struct io_uring ring;
    struct pb_ring_header header;
    struct iovec buffers[2];
    char *area;  // pb_ROOM bytes, then the payload buffer
    size_t payload_size;
    uint64_t unique;     // of the request being served
    uint64_t commit_id;
    int replied;
    int registered;
    int committing;      // the last command sent was a commit (not a registration)
};

static struct fuse_session *session;
static int transport;  // 0 device, 1 ring where offered, 2 ring
static unsigned max_threads = 16;
static int device = -1;
static int stop_fd = -1;
static struct ring_worker *workers;
static unsigned worker_count;
static atomic_uint registered_count;
static atomic_ullong ring_requests;
static atomic_ullong device_requests;
static pthread_mutex_t problem_lock = PTHREAD_MUTEX_INITIALIZER;
static char problem[200];
static __thread struct ring_worker *serving;

static void note_problem(const char *format, ...) {
    char text[sizeof(problem)];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(text, sizeof(text), format, arguments);
    va_end(arguments);
    pthread_mutex_lock(&problem_lock);
    memcpy(problem, text, sizeof(problem));
    pthread_mutex_unlock(&problem_lock);
    fuse_log(FUSE_LOG_ERR, "proxybundle: io_uring: %s\n", text);
}

void pb_uring_configure(struct fuse_session *se, int kind, unsigned threads) {
    session = se;
    device = fuse_session_fd(se);
    max_threads = threads;
    transport = kind;
    if (kind != 0 && stop_fd < 0) {
        stop_fd = eventfd(0, EFD_CLOEXEC);
        if (stop_fd < 0) {
            note_problem("cannot make an eventfd: %s", strerror(errno));
            transport = 0;
        }
    }
}

int pb_uring_wanted(void) {
    return transport != 0;
}

void pb_uring_refused(const char *why) {
    note_problem("%s", why);
}

int pb_uring_serving(void) {
    return worker_count > 0 && atomic_load(&registered_count) == worker_count;
}

uint64_t pb_uring_requests(void) {
    return atomic_load_explicit(&ring_requests, memory_order_relaxed);
}

uint64_t pb_device_requests(void) {
    return atomic_load_explicit(&device_requests, memory_order_relaxed);
}

void pb_uring_count_device_request(void) {
    atomic_fetch_add_explicit(&device_requests, 1, memory_order_relaxed);
}

size_t pb_uring_problem(char *text, size_t size) {
    if (size == 0) return 0;
    pthread_mutex_lock(&problem_lock);
    snprintf(text, size, "%s", problem);
    pthread_mutex_unlock(&problem_lock);
    return strlen(text);
}

// The kernel's number of queues: one per possible CPU (the highest in .../cpu/possible, + 1).
static unsigned possible_queues(void) {
    FILE *file = fopen("/sys/devices/system/cpu/possible", "re");
    if (file == NULL) {
        long count = sysconf(_SC_NPROCESSORS_CONF);
        return count > 0 ? (unsigned)count : 1;
    }
    char line[256] = "";
    if (fgets(line, sizeof(line), file) == NULL) line[0] = 0;
    fclose(file);
    unsigned long highest = 0;
    // "0-1" or "0-3,8-11": every number is a CPU, the last the highest
    for (char *at = line; *at != 0;) {
        if (*at < '0' || *at > '9') {
            at++;
            continue;
        }
        char *end;
        unsigned long number = strtoul(at, &end, 10);
        if (number > highest && number < 65536) highest = number;
        at = end;
    }
    return (unsigned)highest + 1;
}

// Fills the next SQE with a ring command for the thread's entry.
static int ask(struct ring_worker *w, uint32_t command, uint64_t commit_id) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
    if (sqe == NULL) return -EBUSY;
    memset(sqe, 0, 2 * sizeof(*sqe));
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = device;
    sqe->cmd_op = command;
    sqe->addr = (uint64_t)(uintptr_t)w->buffers;
    sqe->len = 2;
    sqe->user_data = TAG_ENTRY;
    struct pb_ring_command request = { .commit_id = commit_id, .qid = (uint16_t)w->qid };
    memcpy(sqe->cmd, &request, sizeof(request));
    w->committing = command == pb_RING_COMMIT_AND_FETCH;
    return 0;
}

static int watch_stop(struct ring_worker *w) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
    if (sqe == NULL) return -EBUSY;
    memset(sqe, 0, 2 * sizeof(*sqe));
    io_uring_prep_poll_add(sqe, stop_fd, POLLIN);
    sqe->user_data = TAG_STOP;
    return 0;
}

static int submit(struct ring_worker *w) {
    int rc;
    do {
        rc = io_uring_submit(&w->ring);
    } while (rc == -EINTR);
    return rc < 0 ? rc : 0;
}

static void set_registered(struct ring_worker *w, int registered) {
    if (w->registered == registered) return;
    w->registered = registered;
    if (registered) atomic_fetch_add(&registered_count, 1);
    else atomic_fetch_sub(&registered_count, 1);
}

static void answer_error(struct ring_worker *w, int error) {
    struct pb_reply_header out = { sizeof(out), error, w->unique };
    memcpy(w->header.in_out, &out, sizeof(out));
    w->header.ring.payload_sz = 0;
    w->replied = 1;
}

ssize_t pb_uring_catch_reply(const struct iovec *iov, int count) {
    struct ring_worker *w = serving;
    if (w == NULL || w->replied || count < 1 || iov[0].iov_len < sizeof(struct pb_reply_header)) return -1;
    struct pb_reply_header out;
    memcpy(&out, iov[0].iov_base, sizeof(out));
    if (out.unique != w->unique) return -1;
    size_t body = iov[0].iov_len - sizeof(out);
    for (int i = 1; i < count; i++) body += iov[i].iov_len;
    if (body > w->payload_size) {
        fuse_log(FUSE_LOG_ERR, "proxybundle: io_uring: a reply of %zu bytes does not fit the ring's %zu; answered EIO\n",
                 body, w->payload_size);
        answer_error(w, -EIO);
        return (ssize_t)sizeof(out);
    }
    char *payload = w->area + pb_ROOM;
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        size_t skip = i == 0 ? sizeof(out) : 0;
        memmove(payload + at, (const char *)iov[i].iov_base + skip, iov[i].iov_len - skip);
        at += iov[i].iov_len - skip;
    }
    out.len = (uint32_t)(sizeof(out) + body);
    memcpy(w->header.in_out, &out, sizeof(out));
    w->header.ring.payload_sz = (uint32_t)body;
    w->replied = 1;
    return (ssize_t)out.len;
}

// Serves the request in the thread's entry; the reply is in the entry afterwards.
static void serve(struct ring_worker *w) {
    atomic_fetch_add_explicit(&ring_requests, 1, memory_order_relaxed);
    uint32_t length;
    memcpy(&length, w->header.in_out, sizeof(length));
    memcpy(&w->unique, w->header.in_out + 8, sizeof(w->unique));
    w->commit_id = w->header.ring.commit_id;
    w->replied = 0;
    uint32_t payload = w->header.ring.payload_sz;
    // the operation's own struct is what the in-header's length leaves to it
    size_t fixed = length >= pb_REQUEST_HEADER_SIZE + (size_t)payload ? length - pb_REQUEST_HEADER_SIZE - payload : SIZE_MAX;
    if (fixed > sizeof(w->header.op_in) || payload > w->payload_size) {
        fuse_log(FUSE_LOG_ERR, "proxybundle: io_uring: a request of %u bytes with %u of payload does not add up; answered EIO\n",
                 length, payload);
        answer_error(w, -EIO);
        return;
    }
    char *request = w->area + pb_ROOM - fixed - pb_REQUEST_HEADER_SIZE;
    memcpy(request, w->header.in_out, pb_REQUEST_HEADER_SIZE);
    memcpy(request + pb_REQUEST_HEADER_SIZE, w->header.op_in, fixed);
    pb_request_arrived(request, length);
    struct fuse_buf buffer = { .size = length, .mem = request };
    serving = w;
    fuse_session_process_buf(session, &buffer);
    serving = NULL;
    if (!w->replied) {
        fuse_log(FUSE_LOG_ERR, "proxybundle: io_uring: request %llu got no reply; answered EIO\n",
                 (unsigned long long)w->unique);
        answer_error(w, -EIO);
    }
}

// Whether a completion with `error` ends the thread: the connection ended, or the kernel
// refuses the entry for good. A refused commit registers the entry again.
static int ends_thread(struct ring_worker *w, int error, unsigned *tries) {
    if (error == -ENOTCONN || error == -ECONNABORTED || error == -ECANCELED || error == -ENODEV) return 1;
    if (error == -EAGAIN && !w->committing && ++*tries < pb_REGISTER_TRIES) {
        usleep(1000);  // the kernel has not processed INIT yet
    } else if (w->committing && *tries < pb_REGISTER_TRIES) {
        note_problem("queue %u: the kernel refused a reply (%s); the entry is registered again", w->qid, strerror(-error));
        *tries += 100;
    } else {
        note_problem("queue %u: the kernel refused a ring entry: %s", w->qid, strerror(-error));
        return 1;
    }
    return ask(w, pb_RING_REGISTER, 0) != 0 || submit(w) != 0;
}

// Whether a completion waits, running the kernel's deferred work for the ring where it has
// some (a request to copy in): polled before the thread sleeps (Spin.c).
static int has_completion(void *argument) {
    struct io_uring *ring = argument;
    if (io_uring_cq_ready(ring) > 0) return 1;
    if (IO_URING_READ_ONCE(*ring->sq.kflags) & IORING_SQ_TASKRUN) {
        io_uring_get_events(ring);
        return io_uring_cq_ready(ring) > 0;
    }
    return 0;
}

static void *serve_ring(void *argument) {
    struct ring_worker *w = argument;
    char name[16];
    snprintf(name, sizeof(name), "pb-ring-%u", w->qid);
    pthread_setname_np(pthread_self(), name);
    // the kernel's work for this ring (copying a request in) waits until the thread asks for
    // completions, instead of interrupting it (see the file's comment)
    struct io_uring_params params = { .flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER
                                               | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG };
    int rc = io_uring_queue_init_params(4, &w->ring, &params);
    if (rc < 0) {
        note_problem("cannot make an io_uring: %s", strerror(-rc));
        return NULL;
    }
    unsigned tries = 0;
    if (watch_stop(w) == 0 && ask(w, pb_RING_REGISTER, 0) == 0 && submit(w) == 0) {
        struct io_uring_cqe *cqe;
        // an entry the kernel refused completes at once; one it took waits for a request
        if (io_uring_peek_cqe(&w->ring, &cqe) != 0) set_registered(w, 1);
        for (;;) {
            pb_spin_until_completed(has_completion, &w->ring);
            rc = io_uring_wait_cqe(&w->ring, &cqe);
            if (rc == -EINTR) continue;
            if (rc < 0) {
                note_problem("queue %u: waiting on the ring: %s", w->qid, strerror(-rc));
                break;
            }
            uint64_t tag = cqe->user_data;
            int result = cqe->res;
            io_uring_cqe_seen(&w->ring, cqe);
            if (tag == TAG_STOP) break;
            if (result == 0) {
                set_registered(w, 1);
                serve(w);
                if (ask(w, pb_RING_COMMIT_AND_FETCH, w->commit_id) != 0 || submit(w) != 0) {
                    note_problem("queue %u: cannot send a reply", w->qid);
                    break;
                }
                continue;
            }
            set_registered(w, 0);
            if (ends_thread(w, result, &tries)) break;
        }
    } else {
        note_problem("queue %u: cannot register a ring entry", w->qid);
    }
    set_registered(w, 0);
    io_uring_queue_exit(&w->ring);
    return NULL;
}

void pb_uring_start(uint32_t max_write, uint32_t max_pages) {
    if (workers != NULL || transport == 0) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t payload = pb_MIN_PAYLOAD;
    if (max_write > payload) payload = max_write;
    if ((size_t)max_pages * page > payload) payload = (size_t)max_pages * page;
    payload = (payload + page - 1) / page * page;
    unsigned queues = possible_queues();
    unsigned per_queue = max_threads / queues < 2 ? 2 : max_threads / queues;
    workers = calloc((size_t)queues * per_queue, sizeof(*workers));
    if (workers == NULL) {
        note_problem("no memory for %u ring threads", queues * per_queue);
        return;
    }
    worker_count = queues * per_queue;
    // the signals that end the daemon go to libfuse's loop (see the file's comment); faults
    // stay with the thread that made them
    sigset_t ending, previous;
    sigemptyset(&ending);
    sigaddset(&ending, SIGHUP);
    sigaddset(&ending, SIGINT);
    sigaddset(&ending, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &ending, &previous);
    for (unsigned i = 0; i < worker_count; i++) {
        struct ring_worker *w = &workers[i];
        w->qid = i % queues;
        w->payload_size = payload;
        void *area = mmap(NULL, pb_ROOM + payload, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (area == MAP_FAILED) {
            note_problem("no memory for the ring's buffers: %s", strerror(errno));
            break;
        }
        w->area = area;
        w->buffers[0] = (struct iovec){ &w->header, sizeof(w->header) };
        w->buffers[1] = (struct iovec){ w->area + pb_ROOM, payload };
        int rc = pthread_create(&w->thread, NULL, serve_ring, w);
        if (rc != 0) {
            note_problem("cannot start a ring thread: %s", strerror(rc));
            break;
        }
        w->started = 1;
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
}

void pb_uring_stop(void) {
    if (workers == NULL) return;
    uint64_t one = 1;
    if (write(stop_fd, &one, sizeof(one)) < 0) note_problem("cannot stop the ring threads: %s", strerror(errno));
    int all_ended = 1;
    // a thread stuck in a request is left behind after 2 s (the process is about to end)
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    for (unsigned i = 0; i < worker_count; i++) {
        struct ring_worker *w = &workers[i];
        if (!w->started) continue;
        if (pthread_timedjoin_np(w->thread, NULL, &deadline) != 0) {
            all_ended = 0;
            continue;
        }
        w->started = 0;
    }
    if (!all_ended) return;
    for (unsigned i = 0; i < worker_count; i++) {
        if (workers[i].area != NULL) munmap(workers[i].area, pb_ROOM + workers[i].payload_size);
    }
    free(workers);
    workers = NULL;
    worker_count = 0;
}
