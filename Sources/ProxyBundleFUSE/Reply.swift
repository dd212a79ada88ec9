#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import ProxyBundleCore

/// The answer to one request. Handlers return one; `FuseServer.handle` sends it, so every
/// request gets exactly one reply and failures are sent from one place.
enum Reply {
    /// success with no data (fuse_reply_err with 0)
    case ok
    /// for FORGET: no reply at all
    case none
    case entry(fuse_entry_param)
    case attributes(stat, timeout: Double)
    case link([UInt8])
    /// an open file or directory, and what its handle holds
    case opened(UnsafeMutablePointer<fuse_file_info>, Opened)
    case created(fuse_entry_param, UnsafeMutablePointer<fuse_file_info>, Opened)
    case written(Int)
    /// file contents streamed from a descriptor (spliced when the kernel allows)
    case fileData(fd: Int32, size: Int, offset: off_t)
    case bytes([UInt8])
    /// a readdirplus buffer, and the nodes whose lookups its entries count
    case entries([UInt8], lookedUp: [NodeID])
    case statistics(statvfs)
    case size(Int)
}

extension FuseServer {
    /// Runs a request's handler with the request's `Request` (the view it reads, its caller)
    /// and sends its reply, or its error. The only place that replies with an error. What the
    /// request's changes left for the kernel to forget is told before the reply.
    @inline(__always)
    static func handle(_ req: fuse_req_t?, _ operation: StaticString, node: fuse_ino_t = 0,
                       name: UnsafePointer<CChar>? = nil, _ body: (FuseServer, Request) throws(Errno) -> Reply) {
        guard let req else { return }
        guard let server = of(req) else {
            _ = fuse_reply_err(req, EIO)
            return
        }
        let request = Request(server.overlay, owner: server.owner(req), origin: KernelRequest(req: req))
        do {
            let reply = try body(server, request)
            server.notifier.deliverBeforeReply(request.takeKernelForgets())
            server.send(reply, to: req, operation)
        } catch {
            server.notifier.deliverBeforeReply(request.takeKernelForgets())
            server.log(failure: error, in: operation, node: node, name: name, request)
            LockOrder.willNotifyKernel()
            _ = fuse_reply_err(req, error.code)
        }
    }

    /// The server a request was made to (not to be asked once the request has its reply).
    static func of(_ req: fuse_req_t?) -> FuseServer? {
        guard let req, let userdata = fuse_req_userdata(req) else { return nil }
        return Unmanaged<FuseServer>.fromOpaque(userdata).takeUnretainedValue()
    }

    private func send(_ reply: Reply, to req: fuse_req_t, _ operation: StaticString) {
        LockOrder.willNotifyKernel()
        let result: Int32
        switch reply {
        case .ok:
            result = fuse_reply_err(req, 0)
        case .none:
            fuse_reply_none(req)
            return
        case .entry(var entry):
            result = fuse_reply_entry(req, &entry)
        case .attributes(var st, let timeout):
            result = fuse_reply_attr(req, &st, timeout)
        case .link(let target):
            result = target.withCStringCopy { fuse_reply_readlink(req, $0) }
        case .opened(let info, _):
            result = fuse_reply_open(req, info)
        case .created(var entry, let info, _):
            result = fuse_reply_create(req, &entry, info)
        case .written(let count):
            result = fuse_reply_write(req, count)
        case .fileData(let fd, let size, let offset):
            var data = fuse_bufvec()
            data.count = 1
            data.buf.size = size
            data.buf.flags = fuse_buf_flags(rawValue: FUSE_BUF_IS_FD.rawValue | FUSE_BUF_FD_SEEK.rawValue)
            data.buf.fd = fd
            data.buf.pos = offset
            result = fuse_reply_data(req, &data, FUSE_BUF_SPLICE_MOVE)
        case .bytes(let bytes), .entries(let bytes, _):
            result = bytes.withUnsafeBytes { fuse_reply_buf(req, $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count) }
        case .statistics(var st):
            result = fuse_reply_statfs(req, &st)
        case .size(let count):
            result = fuse_reply_xattr(req, count)
        }
        if result != 0 {
            // the connection is gone (aborted, or a request timed out): what the reply gave the
            // kernel never reached it, and no FORGET or RELEASE will come for it
            logger.debug("\(operation): reply not delivered (\(Errno(-result).name))")
            undo(reply)
        }
    }

    /// Lets go of what an undelivered reply handed the kernel, as libfuse's high-level layer
    /// does: the lookup an entry counts (or each of a readdirplus buffer's), the file or
    /// listing an open holds.
    private func undo(_ reply: Reply) {
        switch reply {
        case .entry(let entry) where entry.ino != 0:
            overlay.forget(entry.ino, count: 1)
        case .entries(_, let lookedUp):
            for node in lookedUp { overlay.forget(node, count: 1) }
        case .opened(let info, let opened):
            release(opened, info.pointee)
        case .created(let entry, let info, let opened):
            release(opened, info.pointee)
            overlay.forget(entry.ino, count: 1)
        default:
            break
        }
    }
}

/// What the handle of an open file or directory holds, given back at its release.
enum Opened {
    /// the daemon's descriptor of `node`'s file (and its passthrough backing, if any)
    case file(NodeID)
    /// a listing of the directory (ListingStore)
    case listing
    /// nothing: a control file
    case control
}

extension FuseServer {
    /// Lets go of what the handle `info` holds: at RELEASE or RELEASEDIR, or when the reply
    /// to the open never reached the kernel.
    func release(_ opened: Opened, _ info: fuse_file_info) {
        switch opened {
        case .file(let node):
            let fd = Int32(truncatingIfNeeded: info.fh)
            passthrough.release(fd: fd)  // before the descriptor's number can be reused
            overlay.release(node, fd: fd)
        case .listing:
            listings.closed(handle: info.fh)
        case .control:
            break
        }
    }
}
