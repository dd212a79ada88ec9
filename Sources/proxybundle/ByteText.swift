import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// Text for the user whose interpolated paths are their own bytes: a line that names a path
/// that is not UTF-8 names it as it was given (a `String` would replace those bytes). Other
/// values are interpolated as their description.
struct ByteText: ExpressibleByStringInterpolation {
    var bytes: [UInt8]

    init(bytes: [UInt8]) { self.bytes = bytes }
    init(stringLiteral text: String) { bytes = Array(text.utf8) }
    init(stringInterpolation: Interpolation) { bytes = stringInterpolation.bytes }

    struct Interpolation: StringInterpolationProtocol {
        var bytes: [UInt8] = []

        init(literalCapacity: Int, interpolationCount: Int) { bytes.reserveCapacity(literalCapacity) }
        mutating func appendLiteral(_ literal: String) { bytes += literal.utf8 }
        mutating func appendInterpolation(_ path: RawPath) { bytes += path.bytes }
        mutating func appendInterpolation(_ text: ByteText) { bytes += text.bytes }
        mutating func appendInterpolation<T>(_ value: T) { bytes += String(describing: value).utf8 }
    }

    static func + (lhs: ByteText, rhs: ByteText) -> ByteText { ByteText(bytes: lhs.bytes + rhs.bytes) }

    /// Lines joined by `separator`.
    static func joined(_ lines: [ByteText], separator: String = "\n") -> ByteText {
        ByteText(bytes: Array(lines.map(\.bytes).joined(separator: Array(separator.utf8))))
    }

    /// Writes the bytes to file descriptor `fd` (stdout by default), as they are.
    func write(to fd: Int32 = 1) {
        var rest = bytes[...]
        while !rest.isEmpty {
            let written = rest.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            rest = rest.dropFirst(written)
        }
    }
}
