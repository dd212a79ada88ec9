#if canImport(Glibc)
import Glibc
#endif
import CFuseShim

/// How requests travel between the kernel and the daemon (`-o transport=`). Over io_uring
/// (Linux 6.14 and later, where the fuse module's `enable_uring` is on) a request and its reply
/// are one ring completion and one submission on a thread of the daemon's own per entry, instead
/// of a read and a write of /dev/fuse (see `Sources/CFuseShim/Uring.c`). FORGET, INTERRUPT and
/// notifications always go through /dev/fuse.
public enum Transport: String, Sendable, CaseIterable {
    /// io_uring where the kernel offers it, /dev/fuse otherwise (the default).
    case auto
    /// io_uring; a mount is refused where the kernel does not offer it.
    case uring
    /// /dev/fuse only.
    case device

    /// What `pb_uring_configure` takes.
    var code: Int32 {
        switch self {
        case .device: 0
        case .auto: 1
        case .uring: 2
        }
    }

    /// The fuse module's switch for io_uring (`N` by default; root may write `Y`).
    public static let switchPath = "/sys/module/fuse/parameters/enable_uring"

    /// Why this kernel does not offer FUSE over io_uring now, or nil where it does.
    public static var unavailableReason: String? {
        guard let value = firstLine(of: switchPath) else {
            return "this kernel has no FUSE over io_uring (no \(switchPath))"
        }
        guard value == "Y" || value == "1" else {
            return "FUSE over io_uring is off in this kernel (\(switchPath) is \(value); as root: echo Y > \(switchPath))"
        }
        if firstLine(of: "/proc/sys/kernel/io_uring_disabled") == "2" {
            return "io_uring is disabled in this kernel (kernel.io_uring_disabled is 2)"
        }
        return nil
    }

    /// The first line of a small file (a module parameter, a sysctl), or nil.
    private static func firstLine(of path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = read(fd, &bytes, bytes.count)
        guard count >= 0 else { return nil }
        return String(decoding: bytes[..<count].prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
    }

    /// For `.stats`: the transport that carries the requests now, how many each carried, and
    /// what kept the ring from carrying them (where it was wanted).
    static var figures: (inUse: String, uring: UInt64, device: UInt64, problem: String) {
        var text = [CChar](repeating: 0, count: 256)
        let length = pb_uring_problem(&text, text.count)
        let problem = String(decoding: text[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (pb_uring_serving() != 0 ? "uring" : "device", pb_uring_requests(), pb_device_requests(), problem)
    }
}
