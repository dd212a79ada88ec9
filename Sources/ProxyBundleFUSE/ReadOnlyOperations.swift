#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import ProxyBundleCore

/// A read-only mount (`-o ro`): every operation that would change the view answers EROFS.
/// Writes, truncation and create keep their handlers, which serve the control files (so
/// `.invalidate` still works) and get EROFS from the overlay for everything else.
enum ReadOnlyOperations {
    static func install(_ ops: inout fuse_lowlevel_ops) {
        WriteOperations.install(&ops)
        ops.mknod = { req, _, _, _, _ in ReadOnlyOperations.refuse(req, "mknod") }
        ops.mkdir = { req, _, _, _ in ReadOnlyOperations.refuse(req, "mkdir") }
        ops.unlink = { req, _, _ in ReadOnlyOperations.refuse(req, "unlink") }
        ops.rmdir = { req, _, _ in ReadOnlyOperations.refuse(req, "rmdir") }
        ops.symlink = { req, _, _, _ in ReadOnlyOperations.refuse(req, "symlink") }
        ops.rename = { req, _, _, _, _, _ in ReadOnlyOperations.refuse(req, "rename") }
        ops.link = { req, _, _, _ in ReadOnlyOperations.refuse(req, "link") }
        ops.setxattr = { req, _, _, _, _, _ in ReadOnlyOperations.refuse(req, "setxattr") }
        ops.removexattr = { req, _, _ in ReadOnlyOperations.refuse(req, "removexattr") }
    }

    static func refuse(_ req: fuse_req_t?, _ operation: StaticString) {
        FuseServer.handle(req, operation) { _ throws(Errno) -> Reply in throw Errno.readOnly }
    }
}
