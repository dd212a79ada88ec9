// liburing (Debian's liburing-dev), for FUSE over io_uring in CFuseShim's Uring.c. Swift does
// not use it; the target is here for the library to be found and linked.
#ifndef PROXYBUNDLE_CURING_H
#define PROXYBUNDLE_CURING_H

#include <liburing.h>

#endif
