#if canImport(Glibc)
import Glibc
#endif

/// Arguments as the bytes they were given: Swift decodes `argv` as UTF-8 and replaces what is
/// not, but a path is bytes, and the file system holds names that are not UTF-8.
enum RawArguments {
    /// The bytes of the argument the parser gave as `value` (the first argument that decodes to
    /// it, after the command's name), or `value`'s own bytes when none does (an `--option=value`).
    static func bytes(of value: String) -> [UInt8] {
        let decoded = CommandLine.arguments
        for index in decoded.indices.dropFirst() where decoded[index] == value {
            guard let raw = CommandLine.unsafeArgv[index] else { break }
            return Array(UnsafeRawBufferPointer(start: raw, count: strlen(raw)))
        }
        return Array(value.utf8)
    }
}

extension Paths {
    /// `path` (bytes) made absolute against the working directory and normalised without
    /// touching the file system, as `absolute(_:)` does for text.
    static func absolute(bytes path: [UInt8]) -> [UInt8] {
        var base: [UInt8] = []
        if path.first != UInt8(ascii: "/"), let cwd = getcwd(nil, 0) {
            base = Array(UnsafeRawBufferPointer(start: cwd, count: strlen(cwd)))
            free(cwd)
        }
        var parts: [ArraySlice<UInt8>] = []
        for part in (base + [UInt8(ascii: "/")] + path).split(separator: UInt8(ascii: "/")) {
            if part.elementsEqual([0x2E]) { continue }
            if part.elementsEqual([0x2E, 0x2E]) { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return [UInt8(ascii: "/")] + Array(parts.joined(separator: [UInt8(ascii: "/")]))
    }

    /// The canonical path of an existing entry given as bytes (symlinks resolved).
    static func canonical(bytes path: [UInt8]) -> [UInt8]? {
        let resolved = (path + [0]).withUnsafeBufferPointer { buffer in
            buffer.baseAddress.flatMap { $0.withMemoryRebound(to: CChar.self, capacity: buffer.count) { realpath($0, nil) } }
        }
        guard let resolved else { return nil }
        defer { free(resolved) }
        return Array(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
    }
}
