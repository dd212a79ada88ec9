#include "CFuseShim.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

struct fuse_session *pb_session_new(int argc, char **argv,
                                    const struct fuse_lowlevel_ops *ops, void *userdata) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_session *se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
    fuse_opt_free_args(&args);
    return se;
}

int pb_session_loop_mt(struct fuse_session *se, unsigned max_threads, unsigned max_idle) {
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    if (config == NULL) return -ENOMEM;
    fuse_loop_cfg_set_clone_fd(config, 0);
    fuse_loop_cfg_set_max_threads(config, max_threads);
    fuse_loop_cfg_set_idle_threads(config, max_idle);
    int res = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    return res;
}

int pb_notify_bare(struct fuse_session *se, int code) {
    struct { uint32_t len; int32_t error; uint64_t unique; } header = { sizeof(header), code, 0 };
    ssize_t written = write(fuse_session_fd(se), &header, sizeof(header));
    if (written < 0) return -errno;
    return written == (ssize_t)sizeof(header) ? 0 : -EIO;
}

const char *pb_errno_name(int code) {
    return strerrorname_np(code);
}
