// Thin C helpers for what Swift cannot reach of libfuse: its macros and versioned symbols,
// and the FUSE device's own I/O. No logic lives here, except the passthrough amendments of
// Passthrough.c, the request inspection of Request.c, the polling of Spin.c and the io_uring
// transport of Uring.c. The system calls and GNU constants are CSyscalls' (included here, so
// that the FUSE side needs one import).
#ifndef PROXYBUNDLE_CFUSESHIM_H
#define PROXYBUNDLE_CFUSESHIM_H

#include "../../CFuse3/CFuse3.h"
#include "CSyscalls.h"
#include <stdint.h>

// Session creation from an argv-style option list (wraps FUSE_ARGS_INIT).
struct fuse_session *pb_session_new(int argc, char **argv,
                                    const struct fuse_lowlevel_ops *ops, void *userdata);
// The multi-threaded loop with its config (versioned symbol behind a macro).
int pb_session_loop_mt(struct fuse_session *se, unsigned max_threads, unsigned max_idle);

// The session's own I/O (Passthrough.c and Spin.c, the places with logic here), installed
// after mounting, before serving. With `ask_passthrough`, the INIT reply asks for FUSE
// passthrough, which libfuse 3.14 cannot negotiate.
int pb_session_use_io(struct fuse_session *se, int ask_passthrough);
// Registers open file `fd` as a backing file with the FUSE device: its id (> 0) or -errno.
int32_t pb_backing_open(int device, int fd);
// Drops a backing id (open files that use it keep it). 0 or -errno.
int pb_backing_close(int device, int32_t id);
// The OPEN or CREATE reply this thread sends next is a passthrough open of backing `id`.
void pb_reply_with_backing(int32_t id);
// Under FUSE_HANDLE_KILLPRIV_V2 (asked for where the kernel offers it, from Linux 5.11) the
// kernel leaves clearing set-user-ID and set-group-ID bits on write, truncate and chown to the
// daemon, and in return stops asking for security.capability before every write of a file.
// Whether that was agreed; and whether the request being handled on this thread asks for it.
int pb_daemon_clears_setid(void);
int pb_request_clears_setid(void);
// Whether the CREATE being handled on this thread is an O_TMPFILE open (a TMPFILE request).
int pb_request_makes_tmpfile(void);

// Workers poll for the next request up to this long before sleeping, /dev/fuse's and the
// rings' alike (0: never; Spin.c).
void pb_spin_set_limit(unsigned microseconds);
void pb_spin_until_readable(int fd);
// Polls a ring's completion queue (`arrived`) before its thread sleeps (Uring.c).
void pb_spin_until_completed(int (*arrived)(void *), void *ring);

// FUSE over io_uring (Linux 6.14 and later, Uring.c), which libfuse 3.14 does not know: after
// INIT, threads of the daemon's own serve the requests the kernel sends through rings, one
// entry per thread and queue; FORGET, INTERRUPT and notifications stay on /dev/fuse, which
// libfuse's loop keeps reading. `transport`: 0 the device only, 1 the ring where the kernel
// offers it, 2 the ring (the caller checked that it is offered). Before serving.
void pb_uring_configure(struct fuse_session *se, int transport, unsigned max_threads);
// Ends the ring threads (after serving, before unmounting): each closes its ring.
void pb_uring_stop(void);
// Whether the rings carry the requests (every entry registered).
int pb_uring_serving(void);
// Requests served through the rings, and read from /dev/fuse.
uint64_t pb_uring_requests(void);
uint64_t pb_device_requests(void);
// The last problem the rings met (empty if none), copied into `text`; its length.
size_t pb_uring_problem(char *text, size_t size);

// Sends a notification libfuse 3.14 does not wrap: a FUSE out-header with `code` and no
// body (FUSE_NOTIFY_INC_EPOCH = 8 on kernels from 6.16). Returns 0 or -errno.
int pb_notify_bare(struct fuse_session *se, int code);

// The symbolic name of an errno value ("ENOTEMPTY"), or NULL for a number glibc does not name.
const char *pb_errno_name(int code);

#endif
