#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import ProxyBundleCore

/// The low-level operations table. Each callback unpacks its arguments, calls the overlay
/// and returns a `Reply`; `FuseServer.handle` replies.
enum Operations {
    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, connection in
            guard let connection, let userdata else { return }
            let server = Unmanaged<FuseServer>.fromOpaque(userdata).takeUnretainedValue()
            let enforced = Capabilities.negotiate(connection, acl: server.usesACL)
            server.enforcesACL.withLock { $0 = enforced }
        }
        ops.lookup = { req, parent, name in
            var dropsCachedListing = false
            let server = FuseServer.of(req)  // the reply frees the request
            FuseServer.handle(req, "lookup", node: parent, name: name) { server, request throws(Errno) in
                dropsCachedListing = server.listingReaders.noteLookup(thread: Operations.thread(req), parent: parent)
                return try server.lookupReply(request, parent: parent, name: bytes(name))
            }
            // after the reply: the kernel's listing of the parent has names alone (ListingReaders)
            if dropsCachedListing { server?.notifier.invalidateNode(parent) }
        }
        ops.forget = { req, node, count in
            FuseServer.handle(req, "forget") { server, _ in
                server.overlay.forget(node, count: count)
                return .none
            }
        }
        ops.forget_multi = { req, count, forgets in
            FuseServer.handle(req, "forget_multi") { server, _ in
                for index in 0..<count {
                    guard let item = forgets?[index] else { continue }
                    server.overlay.forget(item.ino, count: item.nlookup)
                }
                return .none
            }
        }
        ops.getattr = { req, node, info in
            FuseServer.handle(req, "getattr", node: node) { server, request throws(Errno) in
                let st: stat
                if let info {
                    st = try server.overlay.attributes(request, of: node, openFile: Int32(truncatingIfNeeded: info.pointee.fh))
                } else {
                    st = try server.overlay.attributes(request, of: node)
                }
                return .attributes(server.shownWithinACL(st, of: node, request),
                                   timeout: ControlFile(node: node) == nil ? server.timeouts.attribute : 0)
            }
        }
        ops.readlink = { req, node in
            FuseServer.handle(req, "readlink", node: node) { server, request throws(Errno) in
                .link(try server.overlay.readLink(request, node))
            }
        }
        ops.open = { req, node, info in
            FuseServer.handle(req, "open", node: node) { server, request throws(Errno) in
                guard let info else { throw Errno.invalid }
                if let control = ControlFile(node: node) {
                    try server.openControl(control, info)
                    return .opened(info, .control)
                }
                let flags = info.pointee.flags
                // opening for writing may copy a large file up: the caller's signal stops it (an
                // open for reading, the common one, copies nothing and sets nothing up for it)
                let writes = flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
                let opened = writes
                    ? try server.interruptible(req, request) { () throws(Errno) -> Overlay.OpenedFile in
                        try server.overlay.openFile(request, node, flags: flags)
                    }
                    : try server.overlay.openFile(request, node, flags: flags)
                do throws(Errno) {
                    try server.clearSetIDBitsBeforeWrite(request, node, opened.fd)
                } catch {
                    server.overlay.release(node, fd: opened.fd)
                    throw error
                }
                info.pointee.fh = UInt64(opened.fd)
                try server.serve(node, openAs: opened.fd, identity: (opened.device, opened.inode), info)
                if info.pointee.flags & O_ACCMODE == O_RDONLY, let parent = server.overlay.parent(of: node) {
                    server.prefetcher.noteOpen(thread: Operations.thread(req), parent: parent, node: node, fd: opened.fd)
                }
                return .opened(info, .file(node))
            }
        }
        ops.read = { req, node, size, offset, info in
            FuseServer.handle(req, "read", node: node) { server, request throws(Errno) in
                guard let info else { throw Errno.invalid }
                if let control = ControlFile(node: node) { return server.readControl(control, size: size, offset: offset) }
                return .fileData(fd: Int32(truncatingIfNeeded: info.pointee.fh), size: size, offset: offset)
            }
        }
        ops.flush = { req, node, _ in
            FuseServer.handle(req, "flush", node: node) { server, _ in
                // asked only at the close of a file open for writing that passes through: pages
                // written through a shared mapping went to the layer's file, and the kernel's
                // copy of the times knows nothing of them (it updates them for write(2) only)
                if ControlFile(node: node) == nil { server.notifier.invalidateAttributes(of: node) }
                return .ok
            }
        }
        ops.release = { req, node, info in
            FuseServer.handle(req, "release", node: node) { server, _ in
                if let info { server.release(ControlFile(node: node) == nil ? .file(node) : .control, info.pointee) }
                return .ok
            }
        }
        ops.opendir = { req, node, info in
            FuseServer.handle(req, "opendir", node: node) { server, request throws(Errno) in
                // the kernel then opens every directory without asking, and caches listings
                server.listings.noteOpen()
                if server.timeouts.keepsContent { throw Errno(ENOSYS) }
                guard let info else { throw Errno.invalid }
                try server.overlay.checkDirectory(request, node)
                // its own listing, which interleaved readers of the directory do not share
                info.pointee.fh = server.listings.newHandle()
                return .opened(info, .listing)
            }
        }
        ops.releasedir = { req, node, info in
            FuseServer.handle(req, "releasedir", node: node) { server, _ in
                if let info { server.release(.listing, info.pointee) }
                return .ok
            }
        }
        ops.readdir = { req, node, size, offset, info in
            FuseServer.handle(req, "readdir", node: node) { server, request throws(Errno) in
                let handle = info?.pointee.fh ?? 0
                let position = try server.listings.listing(of: node, handle: handle, at: offset, server.overlay, request)
                let packed = DirectoryPacker.pack(req, position, size: size, server: nil, request)
                if packed.ends { server.listings.finished(position) }
                return .bytes(packed.bytes)
            }
        }
        ops.readdirplus = { req, node, size, offset, info in
            FuseServer.handle(req, "readdirplus", node: node) { server, request throws(Errno) in
                let handle = info?.pointee.fh ?? 0
                let position = try server.listings.listing(of: node, handle: handle, at: offset, server.overlay, request)
                let readers = server.listingReaders
                let attributes = readers.attributes(thread: Operations.thread(req), directory: node, offset: offset)
                let packed = DirectoryPacker.pack(req, position, size: size, server: server, request, attributes: attributes)
                if attributes == .all && offset == 0 {
                    let place = server.overlay.place(request, of: node)
                    if readers.walks(thread: Operations.thread(req), directory: node, parent: place?.parent) {
                        server.prefetcher.announce(subdirectoriesOf: position.listing, listed: place)
                    }
                }
                if packed.ends {
                    server.listings.finished(position)
                    readers.finished(node)
                }
                return .entries(packed.bytes, lookedUp: packed.lookedUp)
            }
        }
        ops.statfs = { req, _ in
            FuseServer.handle(req, "statfs") { server, request throws(Errno) in
                .statistics(try server.overlay.fileSystemStatistics(request))
            }
        }
        ops.getxattr = { req, node, name, size in
            FuseServer.handle(req, "getxattr", node: node) { server, request throws(Errno) in
                server.extendedAttributeReads.withLock { $0 += 1 }
                let value = try server.overlay.extendedAttribute(request, node, name: bytes(name))
                return try Operations.sized(value, size)
            }
        }
        ops.listxattr = { req, node, size in
            FuseServer.handle(req, "listxattr", node: node) { server, request throws(Errno) in
                try Operations.sized(try server.overlay.extendedAttributeNames(request, node), size)
            }
        }
        ops.access = { req, node, mask in
            FuseServer.handle(req, "access", node: node) { server, request throws(Errno) in
                try server.overlay.checkAccess(request, node, mask: mask)
                return .ok
            }
        }
        WriteOperations.install(&ops)
        return ops
    }

    /// The thread that made the request.
    static func thread(_ req: fuse_req_t?) -> pid_t {
        req.flatMap { fuse_req_ctx($0)?.pointee.pid } ?? 0
    }

    /// xattr replies: the size alone when asked with size 0, ERANGE when it does not fit.
    static func sized(_ value: [UInt8], _ size: Int) throws(Errno) -> Reply {
        if size == 0 { return .size(value.count) }
        if value.count > size { throw Errno.range }
        return .bytes(value)
    }
}
