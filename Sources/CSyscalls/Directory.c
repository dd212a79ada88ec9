// The one reader of directories (CSyscalls.h, pb_directory_*): every module's listings go
// through it, the overlay's merged listings as much as a command's look into /proc. getdents64
// straight into one buffer, no stream and no second descriptor, so a directory costs its
// reads and nothing more (four system calls for most, with the open and the close, which
// matters when a merged directory is in hundreds of layers).
#include "CSyscalls.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { pb_DIRECTORY_BUFFER = 32 << 10 };

struct pb_directory {
    int fd;
    // the records read and not yet visited: buffer[offset..<count]
    size_t offset;
    size_t count;
    int reads;
    int large;
    // struct linux_dirent64 records: d_ino at 0, d_off at 8, d_reclen at 16, d_type at 18,
    // the NUL-terminated name at 19
    _Alignas(8) unsigned char buffer[pb_DIRECTORY_BUFFER];
};

struct pb_directory *pb_directory_begin(int fd) {
    // not zeroed: only what the kernel wrote is read
    struct pb_directory *dir = malloc(sizeof *dir);
    if (dir == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    dir->fd = fd;
    dir->offset = 0;
    dir->count = 0;
    dir->reads = 0;
    dir->large = 0;
    return dir;
}

int pb_directory_next(struct pb_directory *dir, struct pb_directory_entry *entry) {
    for (;;) {
        while (dir->offset + 19 < dir->count) {
            const unsigned char *record = dir->buffer + dir->offset;
            uint16_t length;
            memcpy(&length, record + 16, sizeof length);
            if (length <= 19 || dir->offset + length > dir->count) {
                // a record that does not add up ends the batch
                dir->offset = dir->count;
                break;
            }
            dir->offset += length;
            const char *name = (const char *)record + 19;
            size_t size = strnlen(name, length - 19);
            if (name[0] == '.' && (size == 1 || (size == 2 && name[1] == '.'))) continue;
            memcpy(&entry->inode, record, sizeof entry->inode);
            entry->type = record[18];
            entry->name = name;
            entry->length = size;
            return 1;
        }
        long count;
        // a layer on FUSE or NFS may answer a read interrupted by a signal with EINTR: nothing
        // was read, and the position is where it was
        do count = syscall(SYS_getdents64, dir->fd, dir->buffer, sizeof dir->buffer);
        while (count < 0 && errno == EINTR);
        if (count < 0) return -1;
        if (count == 0) return 0;
        if (dir->reads++ == 0) dir->large = (size_t)count > sizeof dir->buffer / 2;
        dir->offset = 0;
        dir->count = (size_t)count;
    }
}

int pb_directory_is_large(const struct pb_directory *dir) {
    return dir->large;
}

void pb_directory_end(struct pb_directory *dir) {
    free(dir);
}
