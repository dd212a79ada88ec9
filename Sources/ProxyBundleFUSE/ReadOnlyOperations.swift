#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import ProxyBundleCore

/// Until the write path lands, every operation that would modify the view answers EROFS
/// (the mount is also made read-only, so the kernel normally refuses them first).
enum ReadOnlyOperations {
    static func install(_ ops: inout fuse_lowlevel_ops) {
        ops.setattr = { req, _, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.mknod = { req, _, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.mkdir = { req, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.unlink = { req, _, _ in ReadOnlyOperations.refuse(req) }
        ops.rmdir = { req, _, _ in ReadOnlyOperations.refuse(req) }
        ops.symlink = { req, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.rename = { req, _, _, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.link = { req, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.write = { req, _, _, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.create = { req, _, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.setxattr = { req, _, _, _, _, _ in ReadOnlyOperations.refuse(req) }
        ops.removexattr = { req, _, _ in ReadOnlyOperations.refuse(req) }
        ops.fallocate = { req, _, _, _, _, _ in ReadOnlyOperations.refuse(req) }
    }

    static func refuse(_ req: fuse_req_t?) {
        FuseServer.handle(req, "write") { _ throws(Errno) -> Reply in throw Errno.readOnly }
    }
}
