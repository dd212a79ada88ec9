#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import CFuseShim
import ProxyBundleCore

/// FUSE passthrough (kernel 6.9 and later, daemon with CAP_SYS_ADMIN): reads and writes of a
/// file opened through the mount go from the kernel straight to the layer's file, without a
/// request to the daemon or a second page cache.
///
/// The kernel requires every open of an inode in passthrough to pass through to the same
/// backing file (it fails any other with EIO), and every open beside page-cached ones to be
/// page-cached. So a node keeps its backing id while it has passthrough opens (the kernel lets
/// go of the backing before it sends their release), and:
/// - an open of a node that passes through to another file (a main-bundle file copied up
///   since, for writing) answers ESTALE and takes the name away from the node: the kernel
///   looks the name up again and opens a new inode, while the opens of the old one keep
///   reading the old file, as with kernel overlayfs;
/// - a node with page-cached opens (the kernel refused a backing) gets no passthrough open.
/// Without passthrough (an older kernel, no privilege) every open is page-cached, as before.
final class Passthrough: Sendable {
    /// How an open is served.
    enum Mode {
        case passthrough(backing: Int32)
        /// The node's inode passes through to another file.
        case stale
        case cached
    }

    private struct Backing {
        var id: Int32
        var device: UInt64
        var inode: UInt64
        var opens: Int
    }

    private struct State {
        /// The FUSE device, once the session asked the kernel for passthrough.
        var fuseDevice: Int32 = -1
        /// Cleared for good when the kernel refuses a backing file for a reason of its own.
        var usable = false
        var backings: [NodeID: Backing] = [:]
        var cachedOpens: [NodeID: Int] = [:]
        /// The passthrough and page-cached opens, by the daemon's descriptor.
        var opens: [Int32: (node: NodeID, passes: Bool)] = [:]
        var served: (passthrough: UInt64, stale: UInt64, cached: UInt64) = (0, 0, 0)
    }

    private let state = Locked(State(), rank: .passthrough)

    /// Passthrough opens may be tried from now on, through `fuseDevice`.
    func enable(fuseDevice: Int32) {
        state.withLock { s in
            s.fuseDevice = fuseDevice
            s.usable = true
        }
    }

    /// How many opens each way were served, for `.stats`; and whether passthrough is usable.
    var statistics: (usable: Bool, passthrough: UInt64, stale: UInt64, cached: UInt64) {
        state.withLock { ($0.usable, $0.served.passthrough, $0.served.stale, $0.served.cached) }
    }

    /// How the open of `node`, as the daemon's descriptor `fd` of the layer's file `identity`
    /// (taken from `fd` when not given), is served. The kernel is asked for a backing id
    /// outside the lock; an open of the same node that registered one meanwhile wins.
    func open(_ node: NodeID, fd: Int32, identity given: (device: UInt64, inode: UInt64)?) -> Mode {
        var st = stat()
        let identity = given ?? (fstat(fd, &st) == 0 ? (device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) : nil)
        var choice = state.withLock { s in Passthrough.choose(node, fd, identity, opened: nil, &s) }
        if case .needsBacking(let device) = choice, let identity {
            LockOrder.willCallSystem("FUSE_DEV_IOC_BACKING_OPEN")
            let id = pb_backing_open(device, fd)
            var unused: Int32? = nil
            choice = state.withLock { s in
                if id <= 0 {
                    // refused for every file (no passthrough in this kernel, no privilege), or
                    // for this one (a layer stacked too deep, out of memory or descriptors)
                    if [-EPERM, -ENOTTY, -EOPNOTSUPP, -EINVAL].contains(id) { s.usable = false }
                    return Passthrough.choose(node, fd, nil, opened: nil, &s)
                }
                let chosen = Passthrough.choose(node, fd, identity, opened: id, &s)
                if case .mode(.passthrough(let used)) = chosen, used == id {} else { unused = id }
                return chosen
            }
            if let unused {
                LockOrder.willCallSystem("FUSE_DEV_IOC_BACKING_CLOSE")
                _ = pb_backing_close(device, unused)
            }
        }
        guard case .mode(let mode) = choice else { return .cached }
        return mode
    }

    private enum Choice {
        case mode(Mode)
        /// No backing yet for the node: one is to be opened through the FUSE device.
        case needsBacking(device: Int32)
    }

    /// Chooses how the open is served and counts it, registering `opened` (a backing id just
    /// given for `fd`) where the node has none; without one, a node without a backing needs one.
    private static func choose(_ node: NodeID, _ fd: Int32, _ identity: (device: UInt64, inode: UInt64)?,
                               opened: Int32?, _ s: inout State) -> Choice {
        let mode: Mode
        if !s.usable || identity == nil || s.cachedOpens[node] != nil {
            mode = .cached
        } else if var backing = s.backings[node], let identity {
            if backing.device == identity.device && backing.inode == identity.inode {
                backing.opens += 1
                s.backings[node] = backing
                mode = .passthrough(backing: backing.id)
            } else {
                mode = .stale
            }
        } else if let opened, let identity {
            s.backings[node] = Backing(id: opened, device: identity.device, inode: identity.inode, opens: 1)
            mode = .passthrough(backing: opened)
        } else {
            return .needsBacking(device: s.fuseDevice)
        }
        switch mode {
        case .passthrough:
            s.served.passthrough += 1
            s.opens[fd] = (node, true)
        case .stale:
            s.served.stale += 1
        case .cached:
            s.served.cached += 1
            s.cachedOpens[node, default: 0] += 1
            s.opens[fd] = (node, false)
        }
        return .mode(mode)
    }

    /// The open served by the daemon's descriptor `fd` was released (or its reply was not
    /// delivered): a node's last passthrough open gives up its backing id.
    func release(fd: Int32) {
        let closing = state.withLock { s -> (device: Int32, id: Int32)? in
            guard let (node, passes) = s.opens.removeValue(forKey: fd) else { return nil }
            if !passes {
                let left = s.cachedOpens[node, default: 1] - 1
                s.cachedOpens[node] = left > 0 ? left : nil
                return nil
            }
            guard var backing = s.backings[node] else { return nil }
            backing.opens -= 1
            if backing.opens > 0 {
                s.backings[node] = backing
                return nil
            }
            s.backings[node] = nil
            return (s.fuseDevice, backing.id)
        }
        if let closing {
            LockOrder.willCallSystem("FUSE_DEV_IOC_BACKING_CLOSE")
            _ = pb_backing_close(closing.device, closing.id)
        }
    }
}

extension FuseServer {
    /// Sets up the reply to the open of `node` as the daemon's descriptor `fd` (of the layer's
    /// file `identity`, if known): passthrough to the layer's file, or the page cache (kept
    /// across opens while cached). ESTALE (with `fd` closed) when the node's inode passes
    /// through to another file.
    func serve(_ node: NodeID, openAs fd: Int32, identity: (device: UInt64, inode: UInt64)?,
               _ info: UnsafeMutablePointer<fuse_file_info>) throws(Errno) {
        switch passthrough.open(node, fd: fd, identity: identity) {
        case .passthrough(let backing):
            pb_reply_with_backing(backing)
            // a FLUSH at each close only where a shared mapping may have written (see ops.flush)
            if info.pointee.flags & O_ACCMODE == O_RDONLY { info.pointee.noflush = 1 }
        case .stale:
            overlay.release(node, fd: fd)
            overlay.detachName(of: node)
            throw Errno.stale
        case .cached:
            info.pointee.keep_cache = timeouts.keepsContent ? 1 : 0
            // the kernel writes mapped pages through the daemon and keeps the times itself
            info.pointee.noflush = 1
        }
    }
}
