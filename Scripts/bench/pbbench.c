/* bench.sh's syscall loops, so that the process running them costs less than what they measure.
 *   pbbench statloop PATH N        N stat() calls of one path
 *   pbbench statfsloop PATH N      N statfs() calls on a mount (never cached: one round trip each)
 *   pbbench missing DIR N          stat() of N distinct missing names in DIR (each must be ENOENT)
 *   pbbench create DIR N SIZE      mkdir DIR, then N new files of SIZE bytes in it
 *   pbbench append ROOT LIST       append one line to ROOT/each path listed in the file LIST
 *   pbbench statlist ROOT LIST     lstat() of ROOT/each path listed in the file LIST (each must exist)
 *   pbbench readloop ROOT LIST SECONDS
 *                                  open, read and close ROOT/each path of LIST in turn for SECONDS;
 *                                  each read must give one of the two contents "one\n" or "two\n"
 *                                  (a path starting with "m") or "main\n"; prints reads, failures,
 *                                  and the 50th, 99th and 99.9th percentile of a read in microseconds
 *   pbbench readany ROOT LIST SECONDS
 *                                  the same, where any content is good but none (a read of 0 bytes)
 *   pbbench swaploop FILE A B RATE SECONDS
 *                                  writes the contents of file A, then B, then A... into FILE (a
 *                                  mount's .layers) RATE times a second for SECONDS; prints the swaps
 *                                  and the 50th and 99th percentile and the longest of a swap (its
 *                                  open, write and close) in microseconds
 *   pbbench seen FILE TEXT SECONDS   opens and reads FILE until it holds TEXT (a newline added), for
 *                                  SECONDS at most; prints the wall-clock time it first did
 *   pbbench check ROOT LIST TEXT   every path of LIST starting with "m" must hold TEXT (a newline
 *                                  added) when opened now; prints how many were checked
 * Exits 1 with a message on the first unexpected result. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

static int statlist(const char *root, const char *list) {
    FILE *f = fopen(list, "r");
    if (!f) return fail("open", list);
    char line[4096], path[8192];
    struct stat st;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        snprintf(path, sizeof path, "%s/%s", root, line);
        if (lstat(path, &st) != 0) return fail("lstat", path);
    }
    fclose(f);
    return 0;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int compare_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int readloop(const char *root, const char *list, double seconds, int anyContent) {
    FILE *f = fopen(list, "r");
    if (!f) return fail("open", list);
    char line[4096];
    char **paths = NULL;
    size_t count = 0, capacity = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        if (count == capacity) paths = realloc(paths, (capacity = capacity ? capacity * 2 : 1024) * sizeof *paths);
        size_t length = strlen(root) + strlen(line) + 2;
        paths[count] = malloc(length);
        snprintf(paths[count++], length, "%s/%s", root, line);
    }
    fclose(f);
    if (!count) { errno = ENOENT; return fail("no paths in", list); }
    size_t samples = 0, room = 1 << 16, failures = 0;
    long *micros = malloc(room * sizeof *micros);
    double end = now() + seconds;
    char buffer[64];
    for (size_t i = 0; now() < end; i = (i + 1) % count) {
        const char *path = paths[i];
        double start = now();
        int fd = open(path, O_RDONLY);
        ssize_t got = fd < 0 ? -1 : read(fd, buffer, sizeof buffer - 1);
        if (fd >= 0) close(fd);
        double took = now() - start;
        const char *name = strrchr(path, '/') + 1;
        int good = got > 0;
        if (good) {
            buffer[got] = 0;
            good = anyContent || (name[0] == 'm' ? !strcmp(buffer, "one\n") || !strcmp(buffer, "two\n") : !strcmp(buffer, "main\n"));
        }
        if (!good && failures++ < 5)
            fprintf(stderr, "pbbench: %s %s: %s\n", fd < 0 ? "open" : "read", path, got < 0 ? strerror(errno) : "unexpected content");
        if (samples == room) micros = realloc(micros, (room *= 2) * sizeof *micros);
        micros[samples++] = (long)(took * 1e6);
    }
    qsort(micros, samples, sizeof *micros, compare_long);
    printf("reads %zu failures %zu p50 %ld p99 %ld p999 %ld\n", samples, failures, micros[samples / 2],
           micros[samples * 99 / 100], micros[samples * 999 / 1000]);
    return failures ? 1 : 0;
}

static int swaploop(const char *file, const char *a, const char *b, double rate, double seconds) {
    static char text[2][1 << 20];
    ssize_t length[2];
    const char *sources[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        int fd = open(sources[k], O_RDONLY);
        if (fd < 0) return fail("open", sources[k]);
        length[k] = read(fd, text[k], sizeof text[k]);
        close(fd);
        if (length[k] <= 0 || length[k] == (ssize_t)sizeof text[k]) return fail("read", sources[k]);
    }
    size_t room = 1 << 12;
    long *micros = malloc(room * sizeof *micros);
    double start = now();
    long swaps = 0;
    while (now() < start + seconds) {
        double began = now();
        int fd = open(file, O_WRONLY);
        if (fd < 0) return fail("open", file);
        if (write(fd, text[swaps % 2], length[swaps % 2]) != length[swaps % 2]) return fail("write", file);
        if (close(fd) != 0) return fail("close", file);
        if ((size_t)swaps == room) micros = realloc(micros, (room *= 2) * sizeof *micros);
        micros[swaps++] = (long)((now() - began) * 1e6);
        double next = start + swaps / rate;
        double wait = next - now();
        if (wait > 0) {
            struct timespec t = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            nanosleep(&t, NULL);
        }
    }
    double took = now() - start;
    qsort(micros, swaps, sizeof *micros, compare_long);
    printf("swaps %ld in %.2f s p50 %ld p99 %ld max %ld\n", swaps, took, swaps ? micros[swaps / 2] : 0,
           swaps ? micros[swaps * 99 / 100] : 0, swaps ? micros[swaps - 1] : 0);
    return 0;
}

/* The first 63 bytes of `path` as a string (empty if it cannot be read). */
static void head(const char *path, char *buffer, size_t size) {
    int fd = open(path, O_RDONLY);
    ssize_t got = fd < 0 ? -1 : read(fd, buffer, size - 1);
    if (fd >= 0) close(fd);
    buffer[got > 0 ? got : 0] = 0;
}

static int seen(const char *file, const char *text, double seconds) {
    char want[256], buffer[256];
    snprintf(want, sizeof want, "%s\n", text);
    double end = now() + seconds;
    while (now() < end) {
        head(file, buffer, sizeof buffer);
        if (!strcmp(buffer, want)) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            printf("seen %ld.%09ld\n", (long)t.tv_sec, t.tv_nsec);
            return 0;
        }
    }
    errno = ETIMEDOUT;
    return fail("never saw the text in", file);
}

static int check(const char *root, const char *list, const char *text) {
    FILE *f = fopen(list, "r");
    if (!f) return fail("open", list);
    char line[4096], path[8192], want[256], buffer[256];
    snprintf(want, sizeof want, "%s\n", text);
    long checked = 0, wrong = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *name = strrchr(line, '/') ? strrchr(line, '/') + 1 : line;
        if (name[0] != 'm') continue;
        snprintf(path, sizeof path, "%s/%s", root, line);
        head(path, buffer, sizeof buffer);
        checked++;
        if (strcmp(buffer, want) && wrong++ < 5) fprintf(stderr, "pbbench: %s holds %s\n", path, buffer);
    }
    fclose(f);
    printf("checked %ld wrong %ld\n", checked, wrong);
    return wrong ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "statloop")) return statloop(argv[2], atol(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "statfsloop")) return statfsloop(argv[2], atol(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "missing")) return missing(argv[2], atol(argv[3]));
    if (argc == 5 && !strcmp(argv[1], "create")) return create(argv[2], atol(argv[3]), atol(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "append")) return append(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "statlist")) return statlist(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "readloop")) return readloop(argv[2], argv[3], atof(argv[4]), 0);
    if (argc == 5 && !strcmp(argv[1], "readany")) return readloop(argv[2], argv[3], atof(argv[4]), 1);
    if (argc == 7 && !strcmp(argv[1], "swaploop")) return swaploop(argv[2], argv[3], argv[4], atof(argv[5]), atof(argv[6]));
    if (argc == 5 && !strcmp(argv[1], "seen")) return seen(argv[2], argv[3], atof(argv[4]));
    if (argc == 5 && !strcmp(argv[1], "check")) return check(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: pbbench statloop PATH N | statfsloop PATH N | missing DIR N | create DIR N SIZE | append ROOT LIST"
                    " | statlist ROOT LIST | readloop ROOT LIST SECONDS | readany ROOT LIST SECONDS | swaploop FILE A B RATE SECONDS | seen FILE TEXT SECONDS | check ROOT LIST TEXT\n");
    return 2;
}
