/* bench.sh's syscall loops, so that the process running them costs less than what they measure.
 *   pbbench statloop PATH N        N stat() calls of one path
 *   pbbench statfsloop PATH N      N statfs() calls on a mount (never cached: one round trip each)
 *   pbbench missing DIR N          stat() of N distinct missing names in DIR (each must be ENOENT)
 *   pbbench create DIR N SIZE      mkdir DIR, then N new files of SIZE bytes in it
 *   pbbench append ROOT LIST       append one line to ROOT/each path listed in the file LIST
 * Exits 1 with a message on the first unexpected result. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

static int fail(const char *what, const char *path) {
    fprintf(stderr, "pbbench: %s %s: %s\n", what, path, strerror(errno));
    return 1;
}

static int statloop(const char *path, long n) {
    struct stat st;
    for (long i = 0; i < n; i++)
        if (stat(path, &st) != 0) return fail("stat", path);
    return 0;
}

static int statfsloop(const char *path, long n) {
    struct statfs st;
    for (long i = 0; i < n; i++)
        if (statfs(path, &st) != 0) return fail("statfs", path);
    return 0;
}

static int missing(const char *dir, long n) {
    char path[4096];
    struct stat st;
    for (long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/missing-%ld.png", dir, i);
        if (stat(path, &st) == 0) { errno = EEXIST; return fail("found", path); }
        if (errno != ENOENT) return fail("stat", path);
    }
    return 0;
}

static int create(const char *dir, long n, long size) {
    char path[4096];
    char *data = malloc(size > 0 ? size : 1);
    if (!data) return fail("malloc", dir);
    memset(data, 'x', size);
    if (mkdir(dir, 0755) != 0) return fail("mkdir", dir);
    for (long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/file%05ld.dat", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) return fail("create", path);
        if (write(fd, data, size) != size) return fail("write", path);
        if (close(fd) != 0) return fail("close", path);
    }
    free(data);
    return 0;
}

static int append(const char *root, const char *list) {
    FILE *f = fopen(list, "r");
    if (!f) return fail("open", list);
    char line[4096], path[8192];
    static const char text[] = "appended by bench.sh\n";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        snprintf(path, sizeof path, "%s/%s", root, line);
        int fd = open(path, O_WRONLY | O_APPEND);
        if (fd < 0) return fail("open", path);
        if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1)) return fail("write", path);
        if (close(fd) != 0) return fail("close", path);
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "statloop")) return statloop(argv[2], atol(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "statfsloop")) return statfsloop(argv[2], atol(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "missing")) return missing(argv[2], atol(argv[3]));
    if (argc == 5 && !strcmp(argv[1], "create")) return create(argv[2], atol(argv[3]), atol(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "append")) return append(argv[2], argv[3]);
    fprintf(stderr, "usage: pbbench statloop PATH N | statfsloop PATH N | missing DIR N | create DIR N SIZE | append ROOT LIST\n");
    return 2;
}
