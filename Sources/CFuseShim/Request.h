// What the request a thread serves is: noted as it arrives, from /dev/fuse (Passthrough.c) or
// from a ring (Uring.c), before libfuse handles it on that thread, and read when its reply
// goes out (Passthrough.c). Both transports depend on this unit; it depends on neither.
// Not for Swift (CFuseShim.h has the accessors the handlers call).
#ifndef PROXYBUNDLE_REQUEST_H
#define PROXYBUNDLE_REQUEST_H

#include <stdint.h>
#include <sys/types.h>

// The parts of the kernel protocol used by more than one unit (include/uapi/linux/fuse.h).
struct pb_in_header {
    uint32_t len;
    uint32_t opcode;
    uint64_t unique;
};
enum {
    pb_FUSE_SETATTR = 4,
    pb_FUSE_OPEN = 14,
    pb_FUSE_WRITE = 16,
    pb_FUSE_INIT = 26,
    pb_FUSE_CREATE = 35,
    pb_FUSE_TMPFILE = 51,
};

// The request being served on this thread (opcode 0: none, or not understood).
struct pb_request {
    uint64_t unique;
    uint32_t opcode;
    int clears_setid;
    int makes_tmpfile;
    // the backing id its OPEN or CREATE reply is to carry (0: none)
    int32_t backing_id;
};
extern __thread struct pb_request pb_this_request;

// Notes the request in `buffer` (as read from /dev/fuse) as this thread's: its unique and
// opcode for the reply's amendments; TMPFILE turned into CREATE; INIT's offer recorded.
void pb_request_arrived(void *buffer, ssize_t count);
// The INIT request's flags and flags2: what the kernel offers.
uint32_t pb_kernel_init_flags(void);
uint32_t pb_kernel_init_flags2(void);
// The INIT reply took on FUSE_HANDLE_KILLPRIV_V2: later requests are checked for its bits.
void pb_daemon_takes_setid_clearing(void);

#endif
