// The one place that chooses the libfuse API version: 3.14, low-level API.
#ifndef PROXYBUNDLE_CFUSE3_H
#define PROXYBUNDLE_CFUSE3_H

#define FUSE_USE_VERSION 314
#include <stddef.h>
#include <fuse_lowlevel.h>

#endif
