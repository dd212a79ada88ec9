// FUSE passthrough (kernel 6.9 and later), which libfuse 3.14 cannot negotiate: the session's
// I/O goes through these two functions, which amend two kinds of reply on their way to the
// kernel. The INIT reply gets the passthrough flag and a stack depth; the reply to an OPEN or
// CREATE gets FOPEN_PASSTHROUGH and the backing file's id, when the handler (on the same
// thread, as libfuse's loop runs each request on the thread that read it) asked for it.
// The INIT reply also takes on FUSE_HANDLE_KILLPRIV_V2 where the kernel offers it (see
// pb_request_clears_setid), and each request read is checked for the bits of that contract.
// A TMPFILE request is handed to libfuse as the CREATE it is shaped like.
// Before each read, a worker may poll for a while (Spin.c).
#include "CFuseShim.h"

#include <errno.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

// The parts of the kernel protocol used here (include/uapi/linux/fuse.h, 7.40).
struct pb_in_header {
    uint32_t len;
    uint32_t opcode;
    uint64_t unique;
};
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
    pb_FUSE_SETATTR = 4,
    pb_FUSE_OPEN = 14,
    pb_FUSE_WRITE = 16,
    pb_FUSE_INIT = 26,
    pb_FUSE_CREATE = 35,
    pb_FUSE_TMPFILE = 51,
    pb_FUSE_HANDLE_KILLPRIV = 1u << 19,
    pb_FUSE_HANDLE_KILLPRIV_V2 = 1u << 28,
    pb_FUSE_INIT_EXT = 1u << 30,
    pb_FUSE_PASSTHROUGH_IN_FLAGS2 = 1u << 5,  // FUSE_PASSTHROUGH is bit 37 of the flags
    pb_FOPEN_PASSTHROUGH = 1u << 7,
    pb_IN_HEADER_SIZE = 40,
    // offsets in request bodies: fuse_init_in's flags, fuse_setattr_in's valid,
    // fuse_open_in's open_flags, fuse_write_in's write_flags
    pb_INIT_IN_FLAGS = 12,
    pb_SETATTR_VALID = 0,
    pb_OPEN_IN_FLAGS = 4,
    pb_WRITE_FLAGS = 20,
    pb_FATTR_FH = 1u << 6,
    pb_FATTR_LOCKOWNER = 1u << 9,
    pb_FATTR_KILL_SUIDGID = 1u << 11,
    pb_FUSE_OPEN_KILL_SUIDGID = 1u << 0,
    pb_FUSE_WRITE_KILL_SUIDGID = 1u << 2,
    // offsets in fuse_init_out
    pb_INIT_FLAGS = 12,
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
static uint32_t kernel_init_flags;
static int clears_setid;
static __thread int request_clears_setid;
static __thread int request_makes_tmpfile;
static __thread uint64_t request_unique;
static __thread uint32_t request_opcode;
static __thread int32_t reply_backing_id;

static uint32_t body32(const void *buffer, ssize_t count, size_t offset) {
    if (count < (ssize_t)(pb_IN_HEADER_SIZE + offset + 4)) return 0;
    return *(const uint32_t *)((const char *)buffer + pb_IN_HEADER_SIZE + offset);
}

// Whether a request asks the daemon to clear set-user-ID and set-group-ID bits. A SETATTR
// that changes nothing is such a request: the kernel found bits to clear before a write,
// and under FUSE_HANDLE_KILLPRIV_V2 it leaves the clearing to the file system.
static int asks_to_clear_setid(uint32_t opcode, const void *buffer, ssize_t count) {
    switch (opcode) {
    case pb_FUSE_SETATTR: {
        uint32_t valid = body32(buffer, count, pb_SETATTR_VALID);
        return (valid & pb_FATTR_KILL_SUIDGID) != 0 || (valid & ~(pb_FATTR_FH | pb_FATTR_LOCKOWNER)) == 0;
    }
    case pb_FUSE_OPEN: return (body32(buffer, count, pb_OPEN_IN_FLAGS) & pb_FUSE_OPEN_KILL_SUIDGID) != 0;
    case pb_FUSE_WRITE: return (body32(buffer, count, pb_WRITE_FLAGS) & pb_FUSE_WRITE_KILL_SUIDGID) != 0;
    default: return 0;
    }
}

static ssize_t passthrough_read(int fd, void *buffer, size_t length, void *userdata) {
    (void)userdata;
    pb_spin_until_readable(fd);
    ssize_t count = read(fd, buffer, length);
    reply_backing_id = 0;
    request_opcode = 0;
    request_clears_setid = 0;
    request_makes_tmpfile = 0;
    if (count >= (ssize_t)sizeof(struct pb_in_header)) {
        struct pb_in_header *in = buffer;
        // libfuse 3.14 knows no TMPFILE, whose request and reply are a CREATE's (fuse_create_in
        // and the name "/"; fuse_entry_out and fuse_open_out): the create handler takes it
        if (in->opcode == pb_FUSE_TMPFILE) {
            in->opcode = pb_FUSE_CREATE;
            request_makes_tmpfile = 1;
        }
        request_unique = in->unique;
        request_opcode = in->opcode;
        if (in->opcode == pb_FUSE_INIT) kernel_init_flags = body32(buffer, count, pb_INIT_IN_FLAGS);
        request_clears_setid = clears_setid && asks_to_clear_setid(in->opcode, buffer, count);
    }
    return count;
}

static void put32(struct iovec *body, size_t offset, uint32_t value) {
    *(uint32_t *)((char *)body->iov_base + offset) = value;
}

static uint32_t get32(struct iovec *body, size_t offset) {
    return *(uint32_t *)((char *)body->iov_base + offset);
}

static ssize_t passthrough_writev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    if (count == 2 && iov[0].iov_len == sizeof(struct pb_out_header)) {
        const struct pb_out_header *out = iov[0].iov_base;
        struct iovec *body = &iov[1];
        if (out->error == 0 && out->unique == request_unique && request_opcode != 0) {
            if (request_opcode == pb_FUSE_INIT && body->iov_len >= pb_INIT_SIZE) {
                if (kernel_init_flags & pb_FUSE_HANDLE_KILLPRIV_V2) {
                    uint32_t flags = get32(body, pb_INIT_FLAGS) & ~pb_FUSE_HANDLE_KILLPRIV;
                    put32(body, pb_INIT_FLAGS, flags | pb_FUSE_HANDLE_KILLPRIV_V2);
                    clears_setid = 1;
                }
                if (passthrough_asked) {
                    put32(body, pb_INIT_FLAGS, get32(body, pb_INIT_FLAGS) | pb_FUSE_INIT_EXT);
                    put32(body, pb_INIT_FLAGS2, get32(body, pb_INIT_FLAGS2) | pb_FUSE_PASSTHROUGH_IN_FLAGS2);
                    put32(body, pb_INIT_MAX_STACK_DEPTH, 1);
                }
            } else if (reply_backing_id > 0 && (request_opcode == pb_FUSE_OPEN || request_opcode == pb_FUSE_CREATE)) {
                size_t open = request_opcode == pb_FUSE_CREATE ? pb_ENTRY_OUT_SIZE : 0;
                if (body->iov_len >= open + pb_OPEN_SIZE) {
                    put32(body, open + pb_OPEN_FLAGS, get32(body, open + pb_OPEN_FLAGS) | pb_FOPEN_PASSTHROUGH);
                    put32(body, open + pb_OPEN_BACKING_ID, (uint32_t)reply_backing_id);
                }
            }
        }
    }
    ssize_t written;
    do {
        written = writev(fd, iov, count);
    } while (written < 0 && errno == EINTR);
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

int pb_request_clears_setid(void) {
    return request_clears_setid;
}

int pb_request_makes_tmpfile(void) {
    return request_makes_tmpfile;
}

int pb_daemon_clears_setid(void) {
    return clears_setid;
}

void pb_reply_with_backing(int32_t id) {
    reply_backing_id = id;
}
