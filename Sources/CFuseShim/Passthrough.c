// FUSE passthrough (kernel 6.9 and later), which libfuse 3.14 cannot negotiate: the session's
// I/O goes through these two functions, which amend two kinds of reply on their way to the
// kernel. The INIT reply gets the passthrough flag and a stack depth; the reply to an OPEN or
// CREATE gets FOPEN_PASSTHROUGH and the backing file's id, when the handler (on the same
// thread, as libfuse's loop runs each request on the thread that read it) asked for it.
// The INIT reply also takes on FUSE_HANDLE_KILLPRIV_V2 where the kernel offers it (see
// pb_request_clears_setid), and each request read is checked for the bits of that contract.
// A TMPFILE request is handed to libfuse as the CREATE it is shaped like. The INIT reply asks
// for FUSE over io_uring where wanted and offered, and replies to requests that came through
// a ring go back through it (Uring.c).
// Before each read, a worker may poll for a while (Spin.c). What the request is, its reply's
// amendments read from Request.c, which each transport tells of every request it reads.
#include "CFuseShim.h"
#include "Request.h"
#include "Uring.h"

#include <errno.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

// The parts of the kernel protocol used here (include/uapi/linux/fuse.h, 7.40).
struct pb_out_header {
    uint32_t len;
    int32_t error;
    uint64_t unique;
};
struct pb_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};
enum {
    pb_FUSE_HANDLE_KILLPRIV = 1u << 19,
    pb_FUSE_HANDLE_KILLPRIV_V2 = 1u << 28,
    pb_FUSE_MAX_PAGES = 1u << 22,
    pb_FUSE_INIT_EXT = 1u << 30,
    pb_DEFAULT_MAX_PAGES = 32,
    pb_FUSE_PASSTHROUGH_IN_FLAGS2 = 1u << 5,  // FUSE_PASSTHROUGH is bit 37 of the flags
    pb_FOPEN_PASSTHROUGH = 1u << 7,
    // offsets in fuse_init_out
    pb_INIT_FLAGS = 12,
    pb_INIT_MAX_WRITE = 20,
    pb_INIT_MAX_PAGES = 28,  // 16 bits
    pb_INIT_FLAGS2 = 32,
    pb_INIT_MAX_STACK_DEPTH = 36,
    pb_INIT_SIZE = 64,
    // offsets in fuse_open_out, and of fuse_open_out in a CREATE reply (after fuse_entry_out)
    pb_OPEN_FLAGS = 8,
    pb_OPEN_BACKING_ID = 12,
    pb_OPEN_SIZE = 16,
    pb_ENTRY_OUT_SIZE = 128,
};
#define pb_FUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct pb_backing_map)
#define pb_FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

static int passthrough_asked;

static ssize_t passthrough_read(int fd, void *buffer, size_t length, void *userdata) {
    (void)userdata;
    pb_spin_until_readable(fd);
    ssize_t count = read(fd, buffer, length);
    if (count > 0) pb_uring_count_device_request();
    pb_request_arrived(buffer, count);
    return count;
}

static void put32(struct iovec *body, size_t offset, uint32_t value) {
    *(uint32_t *)((char *)body->iov_base + offset) = value;
}

static uint32_t get32(struct iovec *body, size_t offset) {
    return *(uint32_t *)((char *)body->iov_base + offset);
}

// Asks for FUSE over io_uring in the INIT reply `body` where it is wanted and the kernel
// offers it; whether it was asked for.
static int ask_for_ring(struct iovec *body) {
    if (!pb_uring_wanted()) return 0;
    if (!(pb_kernel_init_flags() & pb_FUSE_INIT_EXT) || !(pb_kernel_init_flags2() & pb_FUSE_OVER_IO_URING_IN_FLAGS2)) {
        pb_uring_refused("the kernel does not offer FUSE over io_uring (the fuse module's enable_uring is off); "
                         "requests go through /dev/fuse");
        return 0;
    }
    put32(body, pb_INIT_FLAGS, get32(body, pb_INIT_FLAGS) | pb_FUSE_INIT_EXT);
    put32(body, pb_INIT_FLAGS2, get32(body, pb_INIT_FLAGS2) | pb_FUSE_OVER_IO_URING_IN_FLAGS2);
    return 1;
}

// The largest request or reply payload the kernel may send or take, as the INIT reply `body`
// sets them: its max_write and max_pages (32 pages unless FUSE_MAX_PAGES).
static void start_ring(struct iovec *body) {
    uint32_t pages = pb_DEFAULT_MAX_PAGES;
    if (get32(body, pb_INIT_FLAGS) & pb_FUSE_MAX_PAGES) {
        uint16_t asked = *(const uint16_t *)((const char *)body->iov_base + pb_INIT_MAX_PAGES);
        if (asked > pages) pages = asked;
    }
    pb_uring_start(get32(body, pb_INIT_MAX_WRITE), pages);
}

static ssize_t passthrough_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    int ring_asked = 0;
    if (count == 2 && iov[0].iov_len == sizeof(struct pb_out_header)) {
        const struct pb_out_header *out = iov[0].iov_base;
        struct iovec *body = &iov[1];
        const struct pb_request *request = &pb_this_request;
        if (out->error == 0 && out->unique == request->unique && request->opcode != 0) {
            if (request->opcode == pb_FUSE_INIT && body->iov_len >= pb_INIT_SIZE) {
                if (pb_kernel_init_flags() & pb_FUSE_HANDLE_KILLPRIV_V2) {
                    uint32_t flags = get32(body, pb_INIT_FLAGS) & ~pb_FUSE_HANDLE_KILLPRIV;
                    put32(body, pb_INIT_FLAGS, flags | pb_FUSE_HANDLE_KILLPRIV_V2);
                    pb_daemon_takes_setid_clearing();
                }
                if (passthrough_asked) {
                    put32(body, pb_INIT_FLAGS, get32(body, pb_INIT_FLAGS) | pb_FUSE_INIT_EXT);
                    put32(body, pb_INIT_FLAGS2, get32(body, pb_INIT_FLAGS2) | pb_FUSE_PASSTHROUGH_IN_FLAGS2);
                    put32(body, pb_INIT_MAX_STACK_DEPTH, 1);
                }
                ring_asked = ask_for_ring(body);
            } else if (request->backing_id > 0 && (request->opcode == pb_FUSE_OPEN || request->opcode == pb_FUSE_CREATE)) {
                size_t open = request->opcode == pb_FUSE_CREATE ? pb_ENTRY_OUT_SIZE : 0;
                if (body->iov_len >= open + pb_OPEN_SIZE) {
                    put32(body, open + pb_OPEN_FLAGS, get32(body, open + pb_OPEN_FLAGS) | pb_FOPEN_PASSTHROUGH);
                    put32(body, open + pb_OPEN_BACKING_ID, (uint32_t)request->backing_id);
                }
            }
        }
    }
    // the reply to a request that came through a ring goes back through it
    ssize_t caught = pb_uring_catch_reply(iov, count);
    if (caught >= 0) return caught;
    ssize_t written;
    do {
        written = writev(fd, iov, count);
    } while (written < 0 && errno == EINTR);
    // the kernel has processed INIT once its reply is written
    if (ring_asked && written > 0) start_ring(&iov[1]);
    return written;
}

int pb_session_use_io(struct fuse_session *se, int ask_passthrough) {
    static const struct fuse_custom_io io = { .read = passthrough_read, .writev = passthrough_writev };
    passthrough_asked = ask_passthrough;
    return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

int32_t pb_backing_open(int device, int fd) {
    struct pb_backing_map map = { .fd = fd };
    int id = ioctl(device, pb_FUSE_DEV_IOC_BACKING_OPEN, &map);
    return id < 0 ? -errno : id;
}

int pb_backing_close(int device, int32_t id) {
    uint32_t value = (uint32_t)id;
    return ioctl(device, pb_FUSE_DEV_IOC_BACKING_CLOSE, &value) < 0 ? -errno : 0;
}
