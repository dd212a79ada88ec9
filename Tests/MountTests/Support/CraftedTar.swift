import Foundation

/// Tar archives written header by header, so a test can make what no tar tool would: names
/// with `..`, absolute names, links out of the layer, wrong checksums, PAX records of any kind.
struct CraftedTar {
    private(set) var bytes: [UInt8] = []

    enum Kind: UInt8 {
        case file = 0x30, hardLink = 0x31, symlink = 0x32, characterDevice = 0x33, blockDevice = 0x34
        case directory = 0x35, fifo = 0x36, pax = 0x78, gnuLongName = 0x4c
    }

    mutating func add(_ name: String, _ kind: Kind = .file, content: [UInt8] = [], link: String = "",
                      mode: Int = 0o644, device: (Int, Int) = (0, 0), pax: [(String, String)] = [], corrupt: Bool = false) {
        if !pax.isEmpty {
            var records: [UInt8] = []
            for (key, value) in pax {
                let body = " \(key)=\(value)\n"
                var length = body.utf8.count + 1
                while String(length).count + body.utf8.count != length { length += 1 }
                records += Array("\(length)\(body)".utf8)
            }
            append(header("PaxHeader", .pax, size: records.count, link: "", mode: 0o644, device: (0, 0), corrupt: false), records)
        }
        append(header(name, kind, size: content.count, link: link, mode: mode, device: device, corrupt: corrupt), content)
    }

    /// A GNU `././@LongLink` entry naming the next entry.
    mutating func addLongName(_ name: String) {
        let data = Array(name.utf8) + [0]
        append(header("././@LongLink", .gnuLongName, size: data.count, link: "", mode: 0o644, device: (0, 0), corrupt: false), data)
    }

    /// The two zero blocks that end an archive.
    mutating func end() { bytes += [UInt8](repeating: 0, count: 1024) }

    private mutating func append(_ header: [UInt8], _ content: [UInt8]) {
        bytes += header + content + [UInt8](repeating: 0, count: (512 - content.count % 512) % 512)
    }

    private func header(_ name: String, _ kind: Kind, size: Int, link: String, mode: Int, device: (Int, Int), corrupt: Bool) -> [UInt8] {
        var h = [UInt8](repeating: 0, count: 512)
        func put(_ text: String, _ offset: Int, _ length: Int) {
            for (i, byte) in text.utf8.prefix(length).enumerated() { h[offset + i] = byte }
        }
        func octal(_ value: Int, _ offset: Int, _ length: Int) {
            let digits = String(value, radix: 8)
            put(String(repeating: "0", count: max(0, length - 1 - digits.count)) + digits, offset, length - 1)
        }
        put(name, 0, 100)
        octal(mode, 100, 8)
        octal(0, 108, 8)
        octal(0, 116, 8)
        octal(size, 124, 12)
        octal(1_600_000_000, 136, 12)
        h[156] = kind.rawValue
        put(link, 157, 100)
        put("ustar", 257, 6)
        put("00", 263, 2)
        octal(device.0, 329, 8)
        octal(device.1, 337, 8)
        for i in 148..<156 { h[i] = 0x20 }
        let sum = h.reduce(0) { $0 + Int($1) } + (corrupt ? 1 : 0)
        octal(sum, 148, 7)
        return h
    }
}
