#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import CFuseShim
import ProxyBundleCore

/// The operations that change the view. Each lands in the substitution (see `Overlay`); on a
/// read-only mount (`-o ro`, or remounted so) those that only change names or extended
/// attributes answer EROFS before anything else, and the rest get EROFS from the overlay
/// (writes, truncation and create still serve the control files, so `.invalidate` works).
enum WriteOperations {
    static func install(_ ops: inout fuse_lowlevel_ops) {
        ops.create = { req, parent, name, mode, info in
            FuseServer.handle(req, "create", node: parent, name: name) { server, request throws(Errno) in
                guard let info else { throw Errno.invalid }
                if pb_request_makes_tmpfile() != 0 {
                    let made = try server.overlay.createUnnamed(request, mode: mode, flags: info.pointee.flags, in: parent)
                    info.pointee.fh = UInt64(made.fd)
                    try server.serve(made.entry.node, openAs: made.fd, identity: nil, info)
                    return .created(server.entryParameters(made.entry, request), info, .file(made.entry.node))
                }
                if let control = ControlFile(name: bytes(name), in: parent) {
                    try server.openControl(control, info, creating: true)
                    let entry = try server.overlay.lookup(request, parent: parent, name: bytes(name))
                    return .created(server.entryParameters(entry, request), info, .control)
                }
                let made = try server.overlay.create(request, .file(mode: mode, flags: info.pointee.flags), named: bytes(name),
                                                     in: parent)
                info.pointee.fh = UInt64(made.fd ?? -1)
                if let fd = made.fd { try server.serve(made.entry.node, openAs: fd, identity: nil, info) }
                return .created(server.entryParameters(made.entry, request), info, .file(made.entry.node))
            }
        }
        ops.mkdir = { req, parent, name, mode in
            WriteOperations.make(req, "mkdir", .directory(mode: mode), name, parent)
        }
        ops.mknod = { req, parent, name, mode, device in
            WriteOperations.make(req, "mknod", .node(mode: mode, device: device), name, parent)
        }
        ops.symlink = { req, target, parent, name in
            WriteOperations.make(req, "symlink", .symlink(target: bytes(target)), name, parent)
        }
        ops.link = { req, node, parent, name in
            FuseServer.handle(req, "link", node: parent, name: name) { server, request throws(Errno) in
                try server.refuseWhenReadOnly(request)
                return .entry(server.entryParameters(try server.overlay.link(request, node, as: bytes(name), in: parent), request))
            }
        }
        ops.unlink = { req, parent, name in
            FuseServer.handle(req, "unlink", node: parent, name: name) { server, request throws(Errno) in
                try server.refuseWhenReadOnly(request)
                try server.overlay.unlink(request, bytes(name), in: parent)
                return .ok
            }
        }
        ops.rmdir = { req, parent, name in
            FuseServer.handle(req, "rmdir", node: parent, name: name) { server, request throws(Errno) in
                try server.refuseWhenReadOnly(request)
                try server.overlay.removeDirectory(request, bytes(name), in: parent)
                return .ok
            }
        }
        ops.rename = { req, parent, name, newParent, newName, flags in
            FuseServer.handle(req, "rename", node: parent, name: name) { server, request throws(Errno) in
                try server.refuseWhenReadOnly(request)
                // a directory materialized on the way may take long: the caller's signal stops it
                try server.interruptible(req, request) { () throws(Errno) in
                    try server.overlay.rename(request, bytes(name), in: parent, to: bytes(newName), in: newParent, flags: flags)
                }
                return .ok
            }
        }
        ops.setattr = { req, node, attributes, toSet, info in
            FuseServer.handle(req, "setattr", node: node) { server, request throws(Errno) in
                guard let attributes else { throw Errno.invalid }
                if let control = ControlFile(node: node) {
                    return try server.setControlAttributes(control, toSet, request)
                }
                let changes = AttributeRequest.changes(attributes.pointee, toSet)
                let fd = info.map { Int32(truncatingIfNeeded: $0.pointee.fh) }
                var result = try server.interruptible(req, request) { () throws(Errno) -> stat in
                    try server.overlay.setAttributes(request, node, changes, openFile: fd)
                }
                if pb_request_clears_setid() != 0, let cleared = try server.overlay.clearSetIDBits(request, node, openFile: fd) {
                    result = cleared
                }
                return .attributes(server.shownWithinACL(result, of: node, request), timeout: server.timeouts.attribute)
            }
        }
        ops.write = { req, node, buffer, size, offset, info in
            FuseServer.handle(req, "write", node: node) { server, request throws(Errno) in
                guard let info else { throw Errno.invalid }
                if let control = ControlFile(node: node) {
                    let data = buffer.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                    return try server.writeControl(control, data)
                }
                let fd = Int32(truncatingIfNeeded: info.pointee.fh)
                try server.clearSetIDBitsBeforeWrite(request, node, fd)
                let count = pwrite(fd, buffer, size, offset)
                if count < 0 { throw Errno.current }
                return .written(count)
            }
        }
        ops.write_buf = { req, node, source, offset, info in
            FuseServer.handle(req, "write_buf", node: node) { server, request throws(Errno) in
                guard let info, let source else { throw Errno.invalid }
                if let control = ControlFile(node: node) {
                    return try server.writeControl(control, try WriteOperations.gather(source))
                }
                try server.clearSetIDBitsBeforeWrite(request, node, Int32(truncatingIfNeeded: info.pointee.fh))
                var destination = fuse_bufvec()
                destination.count = 1
                destination.buf.size = fuse_buf_size(source)
                destination.buf.flags = fuse_buf_flags(rawValue: FUSE_BUF_IS_FD.rawValue | FUSE_BUF_FD_SEEK.rawValue)
                destination.buf.fd = Int32(truncatingIfNeeded: info.pointee.fh)
                destination.buf.pos = offset
                let count = fuse_buf_copy(&destination, source, fuse_buf_copy_flags(rawValue: 0))
                if count < 0 { throw Errno(Int32(-count)) }
                return .written(count)
            }
        }
        ops.fsync = { req, node, dataOnly, info in
            FuseServer.handle(req, "fsync", node: node) { _, _ throws(Errno) in
                guard let info else { throw Errno.invalid }
                if ControlFile(node: node) != nil { return .ok }
                let fd = Int32(truncatingIfNeeded: info.pointee.fh)
                _ = try WriteOperations.syncCall { dataOnly != 0 ? fdatasync(fd) : fsync(fd) }
                return .ok
            }
        }
        ops.fsyncdir = { req, node, dataOnly, _ in
            FuseServer.handle(req, "fsyncdir", node: node) { server, request throws(Errno) in
                try server.overlay.syncDirectory(request, node, dataOnly: dataOnly != 0)
                return .ok
            }
        }
        ops.copy_file_range = { req, nodeIn, offsetIn, infoIn, nodeOut, offsetOut, infoOut, length, flags in
            FuseServer.handle(req, "copy_file_range") { _, _ throws(Errno) in
                guard let infoIn, let infoOut, flags == 0 else { throw Errno.invalid }
                if ControlFile(node: nodeIn) != nil || ControlFile(node: nodeOut) != nil { throw Errno(EOPNOTSUPP) }
                var input = Int64(offsetIn)
                var output = Int64(offsetOut)
                let count = pb_copy_file_range(Int32(truncatingIfNeeded: infoIn.pointee.fh), &input,
                                               Int32(truncatingIfNeeded: infoOut.pointee.fh), &output, length)
                if count < 0 { throw Errno.current }
                return .written(count)
            }
        }
        ops.fallocate = { req, node, mode, offset, length, info in
            FuseServer.handle(req, "fallocate", node: node) { server, request throws(Errno) in
                guard let info else { throw Errno.invalid }
                if ControlFile(node: node) != nil { throw Errno.notPermitted }
                if !request.isWritable { throw Errno.readOnly }
                let fd = Int32(truncatingIfNeeded: info.pointee.fh)
                _ = try WriteOperations.syncCall { pb_fallocate(fd, mode, Int64(offset), Int64(length)) }
                return .ok
            }
        }
        ops.setxattr = { req, node, name, value, size, flags in
            FuseServer.handle(req, "setxattr", node: node) { server, request throws(Errno) in
                try server.refuseWhenReadOnly(request)
                let data = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                let setsMode = try server.overlay.setExtendedAttribute(request, node, name: bytes(name), value: data, flags: flags)
                // the kernel marks only the change time stale after SETXATTR (without -o acl)
                if setsMode { server.notifier.invalidateAttributes(of: node) }
                return .ok
            }
        }
        ops.removexattr = { req, node, name in
            FuseServer.handle(req, "removexattr", node: node) { server, request throws(Errno) in
                try server.refuseWhenReadOnly(request)
                try server.overlay.removeExtendedAttribute(request, node, name: bytes(name))
                return .ok
            }
        }
    }

    static func make(_ req: fuse_req_t?, _ operation: StaticString, _ entry: Overlay.NewEntry,
                     _ name: UnsafePointer<CChar>?, _ parent: fuse_ino_t) {
        FuseServer.handle(req, operation, node: parent, name: name) { server, request throws(Errno) in
            try server.refuseWhenReadOnly(request)
            let made = try server.overlay.create(request, entry, named: bytes(name), in: parent)
            return .entry(server.entryParameters(made.entry, request))
        }
    }

    /// The bytes of a write_buf source (for the control files, which are small).
    static func gather(_ source: UnsafeMutablePointer<fuse_bufvec>) throws(Errno) -> [UInt8] {
        var data = [UInt8](repeating: 0, count: fuse_buf_size(source))
        let count = data.withUnsafeMutableBytes { raw -> Int in
            var destination = fuse_bufvec()
            destination.count = 1
            destination.buf.size = raw.count
            destination.buf.mem = raw.baseAddress
            return fuse_buf_copy(&destination, source, fuse_buf_copy_flags(rawValue: 0))
        }
        if count < 0 { throw Errno(Int32(-count)) }
        return Array(data[..<count])
    }

    @inline(__always)
    static func syncCall(_ body: () -> Int32) throws(Errno) -> Int32 {
        while true {
            let result = body()
            if result >= 0 { return result }
            if errno != EINTR { throw Errno.current }
        }
    }
}

/// Translates setattr's `to_set` bits into overlay attribute changes.
enum AttributeRequest {
    static func changes(_ st: stat, _ toSet: Int32) -> Overlay.AttributeChanges {
        var changes = Overlay.AttributeChanges()
        if toSet & FUSE_SET_ATTR_MODE != 0 { changes.mode = st.st_mode }
        if toSet & FUSE_SET_ATTR_UID != 0 { changes.uid = st.st_uid }
        if toSet & FUSE_SET_ATTR_GID != 0 { changes.gid = st.st_gid }
        if toSet & FUSE_SET_ATTR_SIZE != 0 { changes.size = st.st_size }
        if toSet & FUSE_SET_ATTR_ATIME_NOW != 0 {
            changes.accessTime = timespec(tv_sec: 0, tv_nsec: pb_UTIME_NOW)
        } else if toSet & FUSE_SET_ATTR_ATIME != 0 {
            changes.accessTime = st.st_atim
        }
        if toSet & FUSE_SET_ATTR_MTIME_NOW != 0 {
            changes.modificationTime = timespec(tv_sec: 0, tv_nsec: pb_UTIME_NOW)
        } else if toSet & FUSE_SET_ATTR_MTIME != 0 {
            changes.modificationTime = st.st_mtim
        }
        return changes
    }
}

extension FuseServer {
    /// EROFS on a read-only mount (as the request's view has it).
    @inline(__always)
    func refuseWhenReadOnly(_ request: Request) throws(Errno) {
        if !request.isWritable { throw Errno.readOnly }
    }
}
