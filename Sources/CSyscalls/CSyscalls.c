#include "CSyscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <malloc.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

const int pb_O_PATH = O_PATH;
const int pb_O_NOFOLLOW = O_NOFOLLOW;
const int pb_O_DIRECTORY = O_DIRECTORY;
const int pb_O_NOATIME = O_NOATIME;
const int pb_O_CLOEXEC = O_CLOEXEC;
const int pb_O_TMPFILE = O_TMPFILE;
const int pb_O_PASSED = O_ACCMODE | O_APPEND | O_NONBLOCK | O_SYNC | O_DSYNC | O_DIRECT | O_NOATIME | O_LARGEFILE
    | O_TRUNC;
const int pb_AT_EMPTY_PATH = AT_EMPTY_PATH;
const int pb_AT_SYMLINK_NOFOLLOW = AT_SYMLINK_NOFOLLOW;
const long pb_UTIME_NOW = UTIME_NOW;
const long pb_UTIME_OMIT = UTIME_OMIT;
const unsigned pb_RENAME_NOREPLACE = RENAME_NOREPLACE;
const unsigned pb_RENAME_EXCHANGE = RENAME_EXCHANGE;
const unsigned pb_RENAME_WHITEOUT = RENAME_WHITEOUT;
const short pb_POSIX_SPAWN_SETSID = POSIX_SPAWN_SETSID;
const unsigned long long pb_RESOLVE_BENEATH = RESOLVE_BENEATH;
const unsigned long long pb_RESOLVE_NO_SYMLINKS = RESOLVE_NO_SYMLINKS;
const unsigned long long pb_RESOLVE_NO_MAGICLINKS = RESOLVE_NO_MAGICLINKS;
const unsigned long long pb_RESOLVE_NO_XDEV = RESOLVE_NO_XDEV;

const uint64_t pb_MOUNT_ATTR_RDONLY = MOUNT_ATTR_RDONLY;
const uint64_t pb_MOUNT_ATTR_NOATIME = MOUNT_ATTR_NOATIME;
const uint64_t pb_MOUNT_ATTR_NODIRATIME = MOUNT_ATTR_NODIRATIME;
const uint64_t pb_MOUNT_ATTR__ATIME = MOUNT_ATTR__ATIME;

int pb_clone_mount(int dirfd, uint64_t set) {
    int fd = (int)syscall(SYS_open_tree, dirfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    if (fd < 0) return -errno;
    struct mount_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.attr_set = set;
    attr.attr_clr = (set & MOUNT_ATTR__ATIME) ? MOUNT_ATTR__ATIME : 0;
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int pb_set_mount_attributes(const char *path, uint64_t set, uint64_t clear) {
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct mount_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.attr_set = set;
    attr.attr_clr = clear;
    int result = (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr));
    int error = errno;
    close(fd);
    return result == 0 ? 0 : -error;
}

int pb_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

// cachestat(2), Linux 6.5; the headers here predate it (the number is the same on every
// architecture).
struct pb_cachestat { uint64_t cache, dirty, writeback, evicted, recently_evicted; };

static int cachestat(int fd, uint64_t length, struct pb_cachestat *stat) {
    struct { uint64_t offset, length; } range = { 0, length };
    memset(stat, 0, sizeof(*stat));
    return syscall(451, fd, &range, stat, 0) == 0 ? 0 : -errno;
}

static int clamped(uint64_t count) {
    return count > 0x7fffffff ? 0x7fffffff : (int)count;
}

int pb_cached_pages(int fd, uint64_t length) {
    struct pb_cachestat stat;
    int error = cachestat(fd, length, &stat);
    return error ? error : clamped(stat.cache);
}

int pb_unwritten_pages(int fd, uint64_t length) {
    struct pb_cachestat stat;
    int error = cachestat(fd, length, &stat);
    return error ? error : clamped(stat.dirty + stat.writeback);
}

int pb_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                 unsigned flags) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

ssize_t pb_getxattrat(int dirfd, const char *name, const char *attribute, void *value, size_t size) {
    struct { uint64_t value; uint32_t size; uint32_t flags; } args = {
        (uint64_t)(uintptr_t)value, size > 0xffffffffu ? 0xffffffffu : (uint32_t)size, 0 };
    return syscall(464, dirfd, name, AT_SYMLINK_NOFOLLOW, attribute, &args, sizeof args);
}

int pb_setxattrat(int dirfd, const char *name, const char *attribute, const void *value, size_t size) {
    struct { uint64_t value; uint32_t size; uint32_t flags; } args = {
        (uint64_t)(uintptr_t)value, size > 0xffffffffu ? 0xffffffffu : (uint32_t)size, 0 };
    return (int)syscall(463, dirfd, name, AT_SYMLINK_NOFOLLOW, attribute, &args, sizeof args);
}

ssize_t pb_listxattrat(int dirfd, const char *name, char *list, size_t size) {
    return syscall(465, dirfd, name, AT_SYMLINK_NOFOLLOW, list, size);
}

ssize_t pb_copy_file_range(int fd_in, int64_t *off_in, int fd_out, int64_t *off_out, size_t len) {
    return copy_file_range(fd_in, (off_t *)off_in, fd_out, (off_t *)off_out, len, 0);
}

int pb_fallocate(int fd, int mode, int64_t offset, int64_t length) {
    return fallocate(fd, mode, (off_t)offset, (off_t)length);
}

const int pb_SEEK_DATA = SEEK_DATA;
const int pb_SEEK_HOLE = SEEK_HOLE;

int pb_set_parent_death_signal(int sig) {
    return prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0);
}

int pb_use_one_malloc_arena(void) {
    return mallopt(M_ARENA_MAX, 1);
}

int pb_set_process_name(const char *name) {
    return prctl(PR_SET_NAME, name, 0, 0, 0);
}

int pb_memfd_create(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1 /* MFD_CLOEXEC */);
}

void pb_write_stderr(const char *text, size_t length) {
    while (length > 0) {
        ssize_t n = write(STDERR_FILENO, text, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        text += n;
        length -= (size_t)n;
    }
}

int pb_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int pb_pidfd_send_signal(int pidfd, int sig) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

int pb_pidfd_getfd(int pidfd, int fd) {
    return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

int pb_mount_id(int dirfd, const char *path, uint64_t *id) {
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
    struct statx st;
    int flags = AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT | (path[0] == 0 ? AT_EMPTY_PATH : 0);
    if (statx(dirfd, path, flags, STATX_MNT_ID | STATX_MNT_ID_UNIQUE, &st) != 0) return -errno;
    if (!(st.stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE))) return -ENOSYS;
    *id = st.stx_mnt_id;
    return 0;
}

int pb_close_from(int first) {
    return (int)syscall(SYS_close_range, first, ~0U, 0);
}

void pb_syslog(int priority, const char *message) {
    syslog(priority, "%s", message);
}

int pb_pending_bytes(int fd) {
    int count = 0;
    return ioctl(fd, FIONREAD, &count) == 0 ? count : -1;
}

int pb_rwlock_init_preferring_writers(pthread_rwlock_t *lock) {
    pthread_rwlockattr_t attributes;
    pthread_rwlockattr_init(&attributes);
    pthread_rwlockattr_setkind_np(&attributes, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int result = pthread_rwlock_init(lock, &attributes);
    pthread_rwlockattr_destroy(&attributes);
    return result;
}

int pb_name_to_handle(int dirfd, const char *path, void *handle, size_t size, int flags) {
    struct file_handle *fh = handle;
    if (size < sizeof(*fh)) return -EINVAL;
    fh->handle_bytes = (unsigned)(size - sizeof(*fh));
    int mount_id = 0;
    return name_to_handle_at(dirfd, path, fh, &mount_id, flags) == 0 ? 0 : -errno;
}

int pb_open_by_handle(int mountfd, void *handle, int flags) {
    int fd = open_by_handle_at(mountfd, handle, flags);
    return fd >= 0 ? fd : -errno;
}

int pb_syncfs(int fd) {
    return syncfs(fd);
}
