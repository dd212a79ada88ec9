// Between the session's I/O (Passthrough.c) and the io_uring transport (Uring.c); not for Swift.
#ifndef PROXYBUNDLE_URING_H
#define PROXYBUNDLE_URING_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

// FUSE_OVER_IO_URING is bit 41 of the INIT flags: bit 9 of flags2 (protocol 7.42).
enum { pb_FUSE_OVER_IO_URING_IN_FLAGS2 = 1u << 9 };

// Inspects a request before libfuse handles it on this thread (Passthrough.c): notes its
// unique and opcode for the reply's amendments, turns TMPFILE into CREATE, and records INIT.
void pb_request_arrived(void *buffer, ssize_t count);

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
// Polls a ring's completion queue (`arrived`) before its thread sleeps (Spin.c).
void pb_spin_until_completed(int (*arrived)(void *), void *ring);
// Counts a request read from /dev/fuse.
void pb_uring_count_device_request(void);

#endif
