// What the session's I/O (Passthrough.c) uses of the io_uring transport (Uring.c); not for
// Swift. The dependency runs one way: Uring.c calls nothing of Passthrough.c (it tells
// Request.c of each request it reads, as Passthrough.c does).
#ifndef PROXYBUNDLE_URING_H
#define PROXYBUNDLE_URING_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

// FUSE_OVER_IO_URING is bit 41 of the INIT flags: bit 9 of flags2 (protocol 7.42).
enum { pb_FUSE_OVER_IO_URING_IN_FLAGS2 = 1u << 9 };

// Whether the INIT reply should ask for the ring (a transport other than the device chosen).
int pb_uring_wanted(void);
// After the INIT reply that asked for the ring went out: registers the ring entries, with
// payload buffers for the negotiated sizes.
void pb_uring_start(uint32_t max_write, uint32_t max_pages);
// The ring was wanted but cannot be had (the kernel did not offer it): why, for .stats.
void pb_uring_refused(const char *why);
// A reply being sent on a thread that serves a ring request, for that request: copied into
// the ring entry (its length is returned); anything else: -1, and it goes to /dev/fuse.
ssize_t pb_uring_catch_reply(const struct iovec *iov, int count);
// Counts a request read from /dev/fuse.
void pb_uring_count_device_request(void);

#endif
