import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// Arguments without loss. Swift decodes `argv` as UTF-8 and replaces what is not, but a
/// path is bytes, and a directory's name need not be UTF-8. The command line is therefore
/// read from the raw `argv` and handed to the parser as text that keeps every byte: a byte
/// that is not part of valid UTF-8 becomes the private-use character U+10FF00 plus the byte
/// (U+10FF80...U+10FFFF), and so do the bytes of a character of that range given as such (so
/// the way back is exact). Valid UTF-8 outside that range is unchanged. `bytes(of:)` turns
/// such text back into the bytes given, and `text(of:)` makes it (for the daemon's image).
enum RawArguments {
    private static let base: UInt32 = 0x10FF00
    private static let escaped: ClosedRange<UInt32> = 0x10FF80...0x10FFFF

    /// Every argument, the program's name first, as lossless text.
    static var all: [String] {
        (0 ..< Int(CommandLine.argc)).map { index in
            CommandLine.unsafeArgv[index].map { text(of: RawPath(cString: $0).bytes) } ?? ""
        }
    }

    /// The bytes an argument of `all` (or anything `text(of:)` made) was given as.
    static func bytes(of argument: String) -> [UInt8] {
        var result: [UInt8] = []
        for scalar in argument.unicodeScalars {
            if escaped.contains(scalar.value) {
                result.append(UInt8(scalar.value - base))
            } else {
                result += String(scalar).utf8
            }
        }
        return result
    }

    /// `bytes` as lossless text (see the type).
    static func text(of bytes: [UInt8]) -> String {
        var result = String.UnicodeScalarView()
        for piece in RawPath.pieces(bytes) {
            guard let text = piece.text else {
                result.append(escape(piece.byte))
                continue
            }
            for scalar in text.unicodeScalars {
                if escaped.contains(scalar.value) {
                    String(scalar).utf8.forEach { result.append(escape($0)) }
                } else {
                    result.append(scalar)
                }
            }
        }
        return String(result)
    }

    private static func escape(_ byte: UInt8) -> Unicode.Scalar {
        Unicode.Scalar(base + UInt32(byte)) ?? "?"
    }
}

extension RawPath {
    /// The path an argument names, as the bytes it was given as.
    init(argument: String) { self.init(bytes: RawArguments.bytes(of: argument)) }

    /// The path as an argument of the daemon's image (see `RawArguments`).
    var argument: String { RawArguments.text(of: bytes) }
}
