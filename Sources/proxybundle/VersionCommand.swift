import ArgumentParser
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Print the version, the git commit and the kernel's FUSE features (also --version, -V)."
    )

    func run() {
        print(VersionCommand.text)
    }

    /// `proxybundle 0.9.0 (commit ...)`, then what the running kernel offers.
    static var text: String {
        "proxybundle \(Version.number) (commit \(Version.commit))\n" + KernelFeatures.current.description
    }
}

/// The FUSE features of the running kernel a mount uses when it can.
struct KernelFeatures: CustomStringConvertible {
    var release: String
    /// Linux 6.9: the kernel reads a layer's file itself for an open the daemon passes through.
    var passthrough: Bool
    /// Linux 6.16: one notification makes the kernel drop every cached name (`.invalidate`).
    var epoch: Bool
    /// Linux 6.14: requests over io_uring rings; nil when the kernel is built without it,
    /// else whether root switched it on (`/sys/module/fuse/parameters/enable_uring`).
    var uring: Bool?

    static var current: KernelFeatures {
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        let version = numbers.count == 2 ? numbers[0] * 1000 + numbers[1] : 0
        let uring = readText("/sys/module/fuse/parameters/enable_uring").map { $0.hasPrefix("Y") }
        return KernelFeatures(release: release, passthrough: version >= 6009, epoch: version >= 6016, uring: uring)
    }

    var description: String {
        let uringText = uring.map { $0 ? "on" : "off (root turns it on: echo Y > /sys/module/fuse/parameters/enable_uring)" }
            ?? "not in this kernel"
        return """
            kernel \(release): passthrough \(passthrough ? "yes" : "no (Linux 6.9)"), \
            epoch notification \(epoch ? "yes" : "no (Linux 6.16)"), io_uring \(uringText)
            """
    }
}
