// The request a thread serves (Request.h): what the reply amendments of Passthrough.c and the
// handlers need to know of it, noted by either transport as the request arrives.
#include "CFuseShim.h"
#include "Request.h"

#include <stdatomic.h>

enum {
    pb_IN_HEADER_SIZE = 40,
    // offsets in request bodies: fuse_init_in's flags, fuse_setattr_in's valid,
    // fuse_open_in's open_flags, fuse_write_in's write_flags
    pb_INIT_IN_FLAGS = 12,
    pb_INIT_IN_FLAGS2 = 16,
    pb_SETATTR_VALID = 0,
    pb_OPEN_IN_FLAGS = 4,
    pb_WRITE_FLAGS = 20,
    pb_FATTR_FH = 1u << 6,
    pb_FATTR_LOCKOWNER = 1u << 9,
    pb_FATTR_KILL_SUIDGID = 1u << 11,
    pb_FUSE_OPEN_KILL_SUIDGID = 1u << 0,
    pb_FUSE_WRITE_KILL_SUIDGID = 1u << 2,
};

__thread struct pb_request pb_this_request;
static uint32_t init_flags;
static uint32_t init_flags2;
static atomic_int clears_setid;

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

void pb_request_arrived(void *buffer, ssize_t count) {
    struct pb_request *request = &pb_this_request;
    *request = (struct pb_request){ 0 };
    if (count < (ssize_t)sizeof(struct pb_in_header)) return;
    struct pb_in_header *in = buffer;
    // libfuse 3.14 knows no TMPFILE, whose request and reply are a CREATE's (fuse_create_in
    // and the name "/"; fuse_entry_out and fuse_open_out): the create handler takes it
    if (in->opcode == pb_FUSE_TMPFILE) {
        in->opcode = pb_FUSE_CREATE;
        request->makes_tmpfile = 1;
    }
    request->unique = in->unique;
    request->opcode = in->opcode;
    if (in->opcode == pb_FUSE_INIT) {
        init_flags = body32(buffer, count, pb_INIT_IN_FLAGS);
        init_flags2 = body32(buffer, count, pb_INIT_IN_FLAGS2);
    }
    request->clears_setid = atomic_load_explicit(&clears_setid, memory_order_relaxed)
                            && asks_to_clear_setid(in->opcode, buffer, count);
}

uint32_t pb_kernel_init_flags(void) {
    return init_flags;
}

uint32_t pb_kernel_init_flags2(void) {
    return init_flags2;
}

void pb_daemon_takes_setid_clearing(void) {
    atomic_store_explicit(&clears_setid, 1, memory_order_relaxed);
}

int pb_daemon_clears_setid(void) {
    return atomic_load_explicit(&clears_setid, memory_order_relaxed);
}

int pb_request_clears_setid(void) {
    return pb_this_request.clears_setid;
}

int pb_request_makes_tmpfile(void) {
    return pb_this_request.makes_tmpfile;
}

void pb_reply_with_backing(int32_t id) {
    pb_this_request.backing_id = id;
}
