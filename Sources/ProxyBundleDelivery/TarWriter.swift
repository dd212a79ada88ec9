#if canImport(Glibc)
import Glibc
#endif

/// Writes a tar archive (ustar headers, PAX records for what they cannot hold: long names and
/// links, large sizes and ids, nanoseconds, extended attributes) to a descriptor, hashing the
/// stream (the layer's diff-id).
final class TarWriter {
    private let fd: Int32
    private(set) var hash = SHA256()
    private(set) var total: UInt64 = 0
    private(set) var entries = 0
    /// Called after each piece written, with the bytes written so far (progress).
    var onWrite: ((UInt64) -> Void)?

    init(fd: Int32) { self.fd = fd }

    func write(_ entry: TarEntry, content: (([UInt8]) throws -> Void) throws -> Void = { _ in }) throws {
        var pax: [(String, [UInt8])] = []
        if entry.name.count > 100 { pax.append(("path", entry.name)) }
        if entry.link.count > 100 { pax.append(("linkpath", entry.link)) }
        if entry.size > 0o77777777777 { pax.append(("size", Array(String(entry.size).utf8))) }
        if entry.uid > 0o7777777 { pax.append(("uid", Array(String(entry.uid).utf8))) }
        if entry.gid > 0o7777777 { pax.append(("gid", Array(String(entry.gid).utf8))) }
        if entry.mtime.nanoseconds != 0 || entry.mtime.seconds < 0 || entry.mtime.seconds > 0o77777777777 {
            pax.append(("mtime", Array(TarWriter.decimal(entry.mtime).utf8)))
        }
        for (name, value) in entry.attributes.sorted(by: { $0.name < $1.name }) { pax.append(("SCHILY.xattr." + name, value)) }
        if !pax.isEmpty {
            var records: [UInt8] = []
            for (key, value) in pax { records += TarWriter.record(key, value) }
            var header = TarEntry(name: Array("PaxHeaders/".utf8) + entry.name.suffix(80), kind: .file, mode: 0o644, uid: 0, gid: 0,
                                  size: UInt64(records.count), mtime: (0, 0), link: [], device: (0, 0), attributes: [])
            header.name = Array(header.name.prefix(100))
            try emit(self.header(header, type: UInt8(ascii: "x")))
            try emit(records)
            try pad(UInt64(records.count))
        }
        try emit(header(entry, type: TarWriter.type(entry.kind)))
        var written: UInt64 = 0
        try content { piece in
            written += UInt64(piece.count)
            try self.emit(piece)
        }
        guard written == entry.size else {
            throw DeliveryError("\(String(decoding: entry.name, as: UTF8.self)) changed size while it was read")
        }
        try pad(entry.size)
        entries += 1
    }

    /// The two zero blocks that end an archive.
    func finish() throws { try emit([UInt8](repeating: 0, count: 1024)) }

    private func pad(_ size: UInt64) throws {
        let padding = Int((512 - size % 512) % 512)
        if padding > 0 { try emit([UInt8](repeating: 0, count: padding)) }
    }

    private func emit(_ bytes: [UInt8]) throws {
        hash.update(bytes)
        total += UInt64(bytes.count)
        try bytes.withUnsafeBytes { raw in
            var at = 0
            while at < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + at, raw.count - at)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw DeliveryError("cannot write the layer", errno: errno) }
                at += n
            }
        }
        onWrite?(total)
    }

    private func header(_ entry: TarEntry, type: UInt8) -> [UInt8] {
        var h = [UInt8](repeating: 0, count: 512)
        func put(_ bytes: [UInt8], _ offset: Int, _ length: Int) {
            for (i, byte) in bytes.prefix(length).enumerated() { h[offset + i] = byte }
        }
        func octal(_ value: UInt64, _ offset: Int, _ length: Int) {
            let digits = Array(String(value, radix: 8).utf8)
            let clipped = digits.count > length - 1 ? [UInt8](repeating: 0x30, count: length - 1) : digits
            put([UInt8](repeating: 0x30, count: length - 1 - clipped.count) + clipped, offset, length - 1)
        }
        put(entry.name, 0, 100)
        octal(UInt64(entry.mode), 100, 8)
        octal(UInt64(entry.uid), 108, 8)
        octal(UInt64(entry.gid), 116, 8)
        octal(entry.size, 124, 12)
        octal(UInt64(max(0, entry.mtime.seconds)), 136, 12)
        h[156] = type
        put(entry.link, 157, 100)
        put(Array("ustar".utf8), 257, 6)
        put(Array("00".utf8), 263, 2)
        octal(UInt64(entry.device.major), 329, 8)
        octal(UInt64(entry.device.minor), 337, 8)
        for i in 148..<156 { h[i] = 0x20 }
        octal(h.reduce(0) { $0 + UInt64($1) }, 148, 7)
        return h
    }

    static func type(_ kind: TarEntry.Kind) -> UInt8 {
        switch kind {
        case .file: UInt8(ascii: "0")
        case .hardLink: UInt8(ascii: "1")
        case .symlink: UInt8(ascii: "2")
        case .characterDevice: UInt8(ascii: "3")
        case .blockDevice: UInt8(ascii: "4")
        case .directory: UInt8(ascii: "5")
        case .fifo: UInt8(ascii: "6")
        }
    }

    /// `LENGTH KEY=VALUE\n`, LENGTH counting itself.
    static func record(_ key: String, _ value: [UInt8]) -> [UInt8] {
        let body = Array(" \(key)=".utf8) + value + [0x0a]
        var length = body.count + 1
        while String(length).utf8.count + body.count != length { length += 1 }
        return Array(String(length).utf8) + body
    }

    static func decimal(_ time: (seconds: Int64, nanoseconds: Int)) -> String {
        guard time.nanoseconds != 0 else { return String(time.seconds) }
        let fraction = String(time.nanoseconds)
        return "\(time.seconds)." + String(repeating: "0", count: 9 - fraction.count) + fraction
    }
}
