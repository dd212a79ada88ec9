/// One entry of a tar archive, with its PAX and GNU extensions already applied.
struct TarEntry {
    enum Kind { case file, hardLink, symlink, characterDevice, blockDevice, directory, fifo }
    var name: [UInt8]
    var kind: Kind
    var mode: UInt32
    var uid: UInt32
    var gid: UInt32
    var size: UInt64
    var mtime: (seconds: Int64, nanoseconds: Int)
    var link: [UInt8]
    var device: (major: UInt32, minor: UInt32)
    /// `SCHILY.xattr.NAME` records, as given.
    var attributes: [(name: String, value: [UInt8])]
}

/// Reads ustar archives with the PAX (`x`, `g`) and GNU (`L`, `K`) extensions; rejects what it
/// cannot read with a `LayerRefusal`. Headers are checked by their checksum.
struct TarReader {
    let stream: ByteStream
    private var global: [(String, [UInt8])] = []
    private(set) var entries = 0
    let maxEntries: Int

    init(stream: ByteStream, maxEntries: Int) {
        self.stream = stream
        self.maxEntries = maxEntries
    }

    /// Extension records are themselves bounded: a PAX header or long name over 1 MiB is refused.
    static let maxExtensionSize: UInt64 = 1 << 20

    /// The next entry (its content then read with `content`), or nil at the end of the archive.
    mutating func next() throws -> TarEntry? {
        var pax: [(String, [UInt8])] = global
        var longName: [UInt8]?, longLink: [UInt8]?
        var lastName: [UInt8] = []
        while true {
            guard let header = try stream.block() else { return nil }  // a missing end block is tolerated
            if header.allSatisfy({ $0 == 0 }) {
                try stream.drain()  // the second end block and any padding count toward the digest
                return nil
            }
            lastName = TarReader.field(header, 0, 100)
            guard TarReader.checksumMatches(header) else {
                throw LayerRefusal(entry: lastName, rule: "its header checksum is wrong (not a tar archive, or damaged)")
            }
            let size = try TarReader.number(header, 124, 12, entry: lastName)
            let type = header[156]
            switch type {
            case UInt8(ascii: "x"), UInt8(ascii: "g"):
                let records = try TarReader.parsePAX(try extensionData(size, entry: lastName), entry: lastName)
                if type == UInt8(ascii: "g") { global.append(contentsOf: records); pax.append(contentsOf: records) }
                else { pax.append(contentsOf: records) }
                continue
            case UInt8(ascii: "L"):
                longName = TarReader.trimNul(try extensionData(size, entry: lastName))
                continue
            case UInt8(ascii: "K"):
                longLink = TarReader.trimNul(try extensionData(size, entry: lastName))
                continue
            default: break
            }
            entries += 1
            if entries > maxEntries {
                throw LayerRefusal(entry: lastName, rule: "the layer has more than \(maxEntries) entries (--max-entries)")
            }
            var entry = try TarReader.entry(header, size: size)
            if let longName { entry.name = longName }
            if let longLink { entry.link = longLink }
            try TarReader.apply(pax, to: &entry)
            if entry.kind != .file { entry.size = 0 }
            return entry
        }
    }

    /// The entry's content in pieces, then its padding to the next block.
    func content(_ entry: TarEntry, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        try stream.read(entry.size, body)
        try stream.read((512 - entry.size % 512) % 512) { _ in }
    }

    private func extensionData(_ size: UInt64, entry: [UInt8]) throws -> [UInt8] {
        guard size <= TarReader.maxExtensionSize else {
            throw LayerRefusal(entry: entry, rule: "an extension header is larger than 1 MiB")
        }
        let data = try stream.bytes(Int(size))
        try stream.read((512 - size % 512) % 512) { _ in }
        return data
    }

    private static func entry(_ header: [UInt8], size: UInt64) throws -> TarEntry {
        var name = field(header, 0, 100)
        let ustar = header[257..<262].elementsEqual("ustar".utf8)
        if ustar && header[263] == UInt8(ascii: "0") {  // POSIX ustar, not GNU: a prefix may lead the name
            let prefix = field(header, 345, 155)
            if !prefix.isEmpty { name = prefix + [UInt8(ascii: "/")] + name }
        }
        let kind: TarEntry.Kind
        switch header[156] {
        case 0, UInt8(ascii: "0"), UInt8(ascii: "7"): kind = .file
        case UInt8(ascii: "1"): kind = .hardLink
        case UInt8(ascii: "2"): kind = .symlink
        case UInt8(ascii: "3"): kind = .characterDevice
        case UInt8(ascii: "4"): kind = .blockDevice
        case UInt8(ascii: "5"): kind = .directory
        case UInt8(ascii: "6"): kind = .fifo
        default:
            throw LayerRefusal(entry: name, rule: "its type '\(String(decoding: [header[156]], as: UTF8.self))' is not one a layer holds")
        }
        if kind == .file && name.last == UInt8(ascii: "/") && header[156] == 0 {
            return try entry(header, size: size, kind: .directory, name: name)
        }
        return try entry(header, size: size, kind: kind, name: name)
    }

    private static func entry(_ header: [UInt8], size: UInt64, kind: TarEntry.Kind, name: [UInt8]) throws -> TarEntry {
        func number32(_ offset: Int, _ length: Int) throws -> UInt32 {
            UInt32(truncatingIfNeeded: try number(header, offset, length, entry: name))
        }
        return TarEntry(name: name, kind: kind, mode: try number32(100, 8) & 0o7777, uid: try number32(108, 8),
                        gid: try number32(116, 8), size: size,
                        mtime: (Int64(truncatingIfNeeded: try number(header, 136, 12, entry: name)), 0),
                        link: field(header, 157, 100), device: (try number32(329, 8), try number32(337, 8)),
                        attributes: [])
    }

    /// PAX records override the header: path, linkpath, size, uid, gid, mtime, xattrs.
    private static func apply(_ records: [(String, [UInt8])], to entry: inout TarEntry) throws {
        for (key, value) in records {
            let text = String(decoding: value, as: UTF8.self)
            switch key {
            case "path": entry.name = value
            case "linkpath": entry.link = value
            case "size", "uid", "gid":
                guard let n = UInt64(text) else { throw LayerRefusal(entry: entry.name, rule: "its PAX \(key) is not a number") }
                if key == "size" { entry.size = n } else if key == "uid" { entry.uid = UInt32(truncatingIfNeeded: n) }
                else { entry.gid = UInt32(truncatingIfNeeded: n) }
            case "mtime":
                let parts = text.split(separator: ".", maxSplits: 1)
                guard let first = parts.first, let seconds = Int64(first) else {
                    throw LayerRefusal(entry: entry.name, rule: "its PAX mtime is not a number")
                }
                var nanoseconds = 0
                if parts.count == 2 { nanoseconds = Int(String((parts[1] + "000000000").prefix(9))) ?? 0 }
                entry.mtime = (seconds, text.hasPrefix("-") && nanoseconds > 0 ? -nanoseconds : nanoseconds)
            default:
                if key.hasPrefix("SCHILY.xattr.") { entry.attributes.append((String(key.dropFirst(13)), value)) }
            }
        }
    }

    /// `LENGTH KEY=VALUE\n` records.
    static func parsePAX(_ data: [UInt8], entry: [UInt8]) throws -> [(String, [UInt8])] {
        var records: [(String, [UInt8])] = []
        var at = 0
        while at < data.count {
            guard let space = data[at...].firstIndex(of: UInt8(ascii: " ")),
                  let length = Int(String(decoding: data[at..<space], as: UTF8.self)), length > space - at,
                  at + length <= data.count, data[at + length - 1] == 0x0a,
                  let equals = data[(space + 1)..<(at + length)].firstIndex(of: UInt8(ascii: "="))
            else { throw LayerRefusal(entry: entry, rule: "its PAX header is malformed") }
            records.append((String(decoding: data[(space + 1)..<equals], as: UTF8.self), Array(data[(equals + 1)..<(at + length - 1)])))
            at += length
        }
        return records
    }

    static func field(_ header: [UInt8], _ offset: Int, _ length: Int) -> [UInt8] {
        let slice = header[offset..<offset + length]
        return Array(slice.prefix { $0 != 0 })
    }

    static func trimNul(_ bytes: [UInt8]) -> [UInt8] { Array(bytes.prefix { $0 != 0 }) }

    /// An octal number, or GNU's base-256 form (first byte's high bit set).
    static func number(_ header: [UInt8], _ offset: Int, _ length: Int, entry: [UInt8]) throws -> UInt64 {
        let bytes = header[offset..<offset + length]
        if let first = bytes.first, first & 0x80 != 0 {
            guard first & 0x40 == 0 else { throw LayerRefusal(entry: entry, rule: "a number in its header is negative") }
            var value = UInt64(first & 0x7f)
            for byte in bytes.dropFirst() {
                guard value >> 56 == 0 else { throw LayerRefusal(entry: entry, rule: "a number in its header is too large") }
                value = value << 8 | UInt64(byte)
            }
            return value
        }
        var value: UInt64 = 0
        for byte in bytes {
            if byte == 0 || byte == 0x20 { if value > 0 { break } else { continue } }
            guard (0x30...0x37).contains(byte), value >> 60 == 0 else {
                throw LayerRefusal(entry: entry, rule: "a number in its header is not octal")
            }
            value = value << 3 | UInt64(byte - 0x30)
        }
        return value
    }

    static func checksumMatches(_ header: [UInt8]) -> Bool {
        var sum: UInt64 = 0
        for (i, byte) in header.enumerated() { sum += (148..<156).contains(i) ? 0x20 : UInt64(byte) }
        guard let stored = try? number(header, 148, 8, entry: []) else { return false }
        return stored == sum
    }
}
