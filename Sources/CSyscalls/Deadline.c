// One file system call on a path that may lie in a mount whose daemon does not answer, made
// in a child process that is waited for at most a deadline. A thread of the caller's own could
// be left behind as well, except where the kernel makes it wait beyond the reach of any signal:
// over FUSE's io_uring transport every request is handed to the daemon's ring at once, and a
// request the daemon holds is waited for until it answers or the connection is aborted. Such a
// thread would keep the whole process from ending; a child left waiting keeps nothing.
// The child makes system calls only (what is safe after fork in a threaded process).
#include "CSyscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void send_all(int fd, const void *bytes, size_t count) {
    const char *at = bytes;
    while (count > 0) {
        ssize_t sent = write(fd, at, count);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) return;
        at += sent;
        count -= (size_t)sent;
    }
}

// Opens `path` for writing through a writable copy of the mount that holds it, for a mount made
// read-only by its per-mount flag (a remount): a detached clone of the mount of `path`'s
// directory with the flag cleared, which goes away with its last descriptor. Needs CAP_SYS_ADMIN.
static int open_through_writable_clone(const char *path) {
    char directory[4096];
    const char *slash = strrchr(path, '/');
    size_t length = slash == NULL ? 0 : (size_t)(slash - path);
    if (slash == NULL || length >= sizeof(directory)) return -EROFS;
    memcpy(directory, path, length);
    directory[length] = 0;
    if (length == 0) strcpy(directory, "/");
    int tree = (int)syscall(SYS_open_tree, AT_FDCWD, directory, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0) return -EROFS;
    struct mount_attr writable = { .attr_clr = MOUNT_ATTR_RDONLY };
    int fd = -EROFS;
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &writable, sizeof(writable)) == 0) {
        fd = openat(tree, slash + 1, O_WRONLY | O_CLOEXEC);
        if (fd < 0) fd = -errno;
    }
    close(tree);
    return fd;
}

static void run_child(int kind, const char *path, void *buffer, size_t size, int report) {
    long result = 0;
    if (kind == PB_CALL_MOUNT_ATTR) {
        const unsigned long long *change = buffer;
        struct mount_attr attributes = { .attr_set = change[0], .attr_clr = change[1] };
        result = syscall(SYS_mount_setattr, AT_FDCWD, path, 0, &attributes, sizeof(attributes)) == 0 ? 0 : -errno;
        send_all(report, &result, sizeof(result));
        return;
    }
    if (kind == PB_CALL_STATFS) {
        struct statfs st;
        result = syscall(SYS_statfs, path, &st) == 0 ? 0 : -errno;
        send_all(report, &result, sizeof(result));
        return;
    }
    int fd = open(path, (kind == PB_CALL_READ ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
    if (fd < 0 && errno == EROFS && kind == PB_CALL_WRITE) fd = open_through_writable_clone(path);
    else if (fd < 0) fd = -errno;
    if (fd < 0) {
        result = fd;
        send_all(report, &result, sizeof(result));
        return;
    }
    if (kind == PB_CALL_WRITE) {
        ssize_t written = write(fd, buffer, size);
        result = written < 0 ? -errno : written;
    } else {
        size_t total = 0;
        while (total < size) {
            ssize_t count = read(fd, (char *)buffer + total, size - total);
            if (count < 0 && errno == EINTR) continue;
            if (count < 0) {
                result = -errno;
                break;
            }
            if (count == 0) break;
            total += (size_t)count;
        }
        if (result == 0) result = (long)total;
    }
    close(fd);
    send_all(report, &result, sizeof(result));
    if (kind == PB_CALL_READ && result > 0) send_all(report, buffer, (size_t)result);
}

static long milliseconds_left(const struct timespec *deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

// Reads `count` bytes from `fd` by the deadline; whether they came.
static int receive(int fd, void *bytes, size_t count, const struct timespec *deadline) {
    char *at = bytes;
    while (count > 0) {
        long left = milliseconds_left(deadline);
        if (left <= 0) return 0;
        struct pollfd ready = { .fd = fd, .events = POLLIN };
        int polled = poll(&ready, 1, (int)left);
        if (polled < 0 && errno == EINTR) continue;
        if (polled <= 0) return 0;
        ssize_t got = read(fd, at, count);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        at += got;
        count -= (size_t)got;
    }
    return 1;
}

long pb_call_with_deadline(int kind, const char *path, void *buffer, size_t size, int milliseconds) {
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) return -errno;
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(ends[0]);
        close(ends[1]);
        return -error;
    }
    if (child == 0) {
        close(ends[0]);
        run_child(kind, path, buffer, size, ends[1]);
        _exit(0);
    }
    close(ends[1]);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += milliseconds / 1000;
    deadline.tv_nsec += (long)(milliseconds % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000;
    }
    long result = -ETIMEDOUT;
    if (!receive(ends[0], &result, sizeof(result), &deadline)) result = -ETIMEDOUT;
    else if (kind == PB_CALL_READ && result > 0 && !receive(ends[0], buffer, (size_t)result, &deadline)) result = -ETIMEDOUT;
    close(ends[0]);
    if (result == -ETIMEDOUT) {
        // left waiting in the kernel; it ends, unwaited for, once the call returns
        kill(child, SIGKILL);
    } else {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
    }
    return result;
}
