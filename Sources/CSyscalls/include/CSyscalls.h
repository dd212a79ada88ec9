// Thin C helpers for what Swift cannot reach of the C library and the kernel: GNU-only
// constants, and raw system calls without a glibc wrapper. No FUSE header: the overlay core
// and the resources library use these without libfuse.
#ifndef PROXYBUNDLE_CSYSCALLS_H
#define PROXYBUNDLE_CSYSCALLS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/xattr.h>

// GNU constants glibc's Swift overlay does not export.
extern const int pb_O_PATH;
extern const int pb_O_NOFOLLOW;
extern const int pb_O_DIRECTORY;
extern const int pb_O_NOATIME;
extern const int pb_O_CLOEXEC;
// The open flags of a request that are passed on to the layer's file. The kernel's request
// also carries flags of its own (__FMODE_EXEC when it runs the file), which openat2 refuses.
extern const int pb_O_PASSED;
extern const int pb_O_TMPFILE;
extern const int pb_AT_EMPTY_PATH;
extern const int pb_AT_SYMLINK_NOFOLLOW;
extern const long pb_UTIME_NOW;
extern const long pb_UTIME_OMIT;
extern const unsigned pb_RENAME_NOREPLACE;
extern const unsigned pb_RENAME_EXCHANGE;
extern const unsigned pb_RENAME_WHITEOUT;
extern const short pb_POSIX_SPAWN_SETSID;
extern const unsigned long long pb_RESOLVE_BENEATH;
extern const unsigned long long pb_RESOLVE_NO_SYMLINKS;
extern const unsigned long long pb_RESOLVE_NO_MAGICLINKS;
extern const unsigned long long pb_RESOLVE_NO_XDEV;

// System calls without a glibc wrapper on Debian 12.
// A detached copy of the mount tree at `dirfd` (open_tree with OPEN_TREE_CLONE, recursive,
// close-on-exec) given the mount attributes `set` (mount_setattr; an access-time one replaces
// the tree's own): a descriptor of its root, or -errno (EPERM without CAP_SYS_ADMIN, ENOSYS
// before Linux 5.12).
int pb_clone_mount(int dirfd, uint64_t set);
extern const uint64_t pb_MOUNT_ATTR_RDONLY;
extern const uint64_t pb_MOUNT_ATTR_NOATIME;
extern const uint64_t pb_MOUNT_ATTR_NODIRATIME;
extern const uint64_t pb_MOUNT_ATTR__ATIME;
// mount_setattr of the mount at `path` (its root, opened O_PATH: no request to a FUSE daemon),
// clearing the MOUNT_ATTR_ flags `clear` and setting `set`; 0 or -errno.
int pb_set_mount_attributes(const char *path, uint64_t set, uint64_t clear);
int pb_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);
// How many of the pages of the first `length` bytes (0: all) of the file open as `fd` are in
// the page cache (cachestat); -errno on failure (-ENOSYS before Linux 6.5).
int pb_cached_pages(int fd, uint64_t length);
// How many of them are dirty or under writeback: not yet on the disk.
int pb_unwritten_pages(int fd, uint64_t length);
int pb_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                 unsigned flags);
// Extended attributes of the entry `name` in directory `dirfd`, not following a symlink
// (getxattrat and listxattrat, Linux 6.13): -1 with errno ENOSYS before.
ssize_t pb_getxattrat(int dirfd, const char *name, const char *attribute, void *value, size_t size);
ssize_t pb_listxattrat(int dirfd, const char *name, char *list, size_t size);
int pb_setxattrat(int dirfd, const char *name, const char *attribute, const void *value, size_t size);
// The one reader of directories (Directory.c): the entries of the directory open as `fd`,
// from its offset on, in the order the file system gives them, "." and ".." left out, read
// with getdents64 in batches of 32 KiB. The caller keeps `fd` open until pb_directory_end,
// and closes it.
struct pb_directory;
struct pb_directory_entry {
    const char *name;  // NUL-terminated; valid until the next call
    size_t length;
    uint64_t inode;
    unsigned char type;  // DT_*
};
// A reader of `fd`; NULL with errno ENOMEM.
struct pb_directory *pb_directory_begin(int fd);
// The next entry: 1 with `entry` filled, 0 at the end, -1 with errno (getdents64's).
int pb_directory_next(struct pb_directory *dir, struct pb_directory_entry *entry);
// Whether the first read filled more than half the buffer: more names than one read holds
// are likely to follow.
int pb_directory_is_large(const struct pb_directory *dir);
void pb_directory_end(struct pb_directory *dir);
ssize_t pb_copy_file_range(int fd_in, int64_t *off_in, int fd_out, int64_t *off_out, size_t len);
int pb_fallocate(int fd, int mode, int64_t offset, int64_t length);
extern const int pb_SEEK_DATA;
extern const int pb_SEEK_HOLE;
// prctl(PR_SET_PDEATHSIG, sig)
int pb_set_parent_death_signal(int sig);
// mallopt(M_ARENA_MAX, 1): every thread allocates from the one main arena.
int pb_use_one_malloc_arena(void);
// prctl(PR_SET_NAME, name): the name ps and top show (at most 15 bytes).
int pb_set_process_name(const char *name);
// memfd_create(name, MFD_CLOEXEC): an anonymous file, closed on exec unless made inheritable.
int pb_memfd_create(const char *name);
// Writes a whole buffer to stderr (Swift 6 cannot name libc's stderr).
void pb_write_stderr(const char *text, size_t length);
// pidfd_open(pid, 0): a descriptor that becomes readable when the process exits.
int pb_pidfd_open(int pid);
// pidfd_send_signal(pidfd, sig, NULL, 0): signals the process the descriptor was opened
// for, never another that got its pid since (the tests' way to signal a daemon not their child).
int pb_pidfd_send_signal(int pidfd, int sig);
// pidfd_getfd(pidfd, fd, 0): a copy of descriptor `fd` of the process behind `pidfd` (the
// tests' way to hold a daemon's /dev/fuse open past its death).
int pb_pidfd_getfd(int pidfd, int fd);
// The ID of the mount `path` is on (relative to `dirfd`; "" with `dirfd` alone), asking the
// file system nothing (AT_STATX_DONT_SYNC): the unique 64-bit ID where the kernel has one
// (STATX_MNT_ID_UNIQUE, Linux 6.8), the reusable one otherwise. 0, or -errno on failure.
int pb_mount_id(int dirfd, const char *path, uint64_t *id);
// close_range(first, ~0U, 0): closes every descriptor from `first` up.
int pb_close_from(int first);
// syncfs(2), GNU-only in glibc's headers: a layer extracted whole is synced in one call.
int pb_syncfs(int fd);
// syslog(priority, "%s", message) (variadic, so not callable from Swift).
void pb_syslog(int priority, const char *message);
// pthread_rwlock_init with PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP (a GNU kind).
int pb_rwlock_init_preferring_writers(pthread_rwlock_t *lock);
// ioctl(fd, FIONREAD): the bytes waiting to be read (an inotify descriptor's events), or -1.
int pb_pending_bytes(int fd);

// One call on `path` made in a child process, waited for at most `milliseconds` (Deadline.c):
// PB_CALL_STATFS; PB_CALL_READ, up to `size` bytes into `buffer`; PB_CALL_WRITE, the `size`
// bytes of `buffer` in one write (on a mount made read-only by its per-mount flag, through a
// writable clone of it where the caller may make one); PB_CALL_MOUNT_ATTR, mount_setattr of the
// mount at `path` with `buffer` two uint64_t, the MOUNT_ATTR_ flags to set and to clear. The
// bytes read or written (0 for statfs and mount_setattr), or -errno, or -ETIMEDOUT when no
// answer came in time (the child is left to end by itself).
enum { PB_CALL_STATFS = 0, PB_CALL_READ = 1, PB_CALL_WRITE = 2, PB_CALL_MOUNT_ATTR = 3 };
long pb_call_with_deadline(int kind, const char *path, void *buffer, size_t size, int milliseconds);

// File handles (for the tests): name_to_handle_at of `path` in `dirfd` (`flags`: AT_ flags)
// into `handle`, `size` bytes (a struct file_handle and its bytes): 0, or -errno.
int pb_name_to_handle(int dirfd, const char *path, void *handle, size_t size, int flags);
// open_by_handle_at(mountfd, handle, flags) of a handle from pb_name_to_handle: a descriptor,
// or -errno.
int pb_open_by_handle(int mountfd, void *handle, int flags);

#endif
