#if canImport(Glibc)
import Glibc
#endif

/// The images a mountpoint was switched to, oldest first, kept in the store as
/// `history/KEY` (KEY from the mountpoint's path): one JSON object a line. The current image is
/// the last entry not rolled back.
public struct History {
    public struct Entry: Sendable {
        public var time: Int
        public var image: PulledImage
        public var rolledBack = false

        var json: JSON {
            .object([("time", .number(Double(time)))] + image.fields + [("rolledBack", .bool(rolledBack))])
        }

        init(time: Int, image: PulledImage, rolledBack: Bool = false) {
            self.time = time
            self.image = image
            self.rolledBack = rolledBack
        }

        init?(json: JSON) {
            guard let time = json["time"]?.number, let image = PulledImage(json: json) else { return nil }
            self.init(time: Int(time), image: image, rolledBack: json["rolledBack"] == .bool(true))
        }
    }

    public let mountpoint: [UInt8]
    public private(set) var entries: [Entry]
    let file: String

    /// The history of `mountpoint` (its absolute path) in `store`, empty if it has none.
    public init(store: Store, mountpoint: [UInt8]) {
        self.init(file: store.root + "/history/" + String(SHA256.hex(mountpoint).prefix(40)), mountpoint: mountpoint)
    }

    /// A history file as it is (its first line names the mountpoint).
    init(file: String, mountpoint: [UInt8]? = nil) {
        self.file = file
        let lines = (try? ImageLayout.read(file, limit: 16 << 20))?.split(separator: 0x0a) ?? []
        let named = lines.first.flatMap { try? JSON.parse(Array($0)) }?["mountpoint"]?.string
        self.mountpoint = mountpoint ?? Array((named ?? "").utf8)
        entries = lines.dropFirst().compactMap { try? JSON.parse(Array($0)) }.compactMap(Entry.init(json:))
    }

    /// The index of the entry in use: the last one not rolled back.
    public var current: Int? { entries.lastIndex { !$0.rolledBack } }

    public mutating func append(_ image: PulledImage) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        entries.append(Entry(time: now.tv_sec, image: image))
    }

    /// Marks the current entry rolled back; returns the index of the entry before it, now current.
    public mutating func rollBack() throws -> Int {
        guard let current else { throw DeliveryError("no image was set on this mountpoint with layers --set-image") }
        guard let previous = entries[..<current].lastIndex(where: { !$0.rolledBack }) else {
            throw DeliveryError("there is no earlier image to roll back to (see layers --history)")
        }
        entries[current].rolledBack = true
        return previous
    }

    /// Makes `image` current: a new entry, unless the current entry has the same manifest (a
    /// tag that has not moved), whose record of who signed it is then brought up to date.
    /// Returns whether anything changed (to save).
    public mutating func setCurrent(_ image: PulledImage) -> Bool {
        guard let current, entries[current].image.manifestDigest == image.manifestDigest else {
            append(image)
            return true
        }
        guard entries[current].image.signers != image.signers else { return false }
        verified(current, by: image.signers)
        return true
    }

    /// Records who verified entry `index` when it was checked again.
    public mutating func verified(_ index: Int, by signers: [String]) {
        entries[index].image.signers = signers
    }

    /// Writes the history (the store's lock held); the first line names the mountpoint.
    public func save() throws {
        let directory = String(file[..<(file.lastIndex(of: "/") ?? file.endIndex)])
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            throw DeliveryError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        let head = JSON.object([("mountpoint", .string(String(decoding: mountpoint, as: UTF8.self)))])
        let text = ([head] + entries.map(\.json)).map(\.text).joined(separator: "\n") + "\n"
        try Store.writeAtomically(file, Array(text.utf8))
    }

    /// `2026-11-27T03:40:00Z`
    public static func format(_ time: Int) -> String {
        var seconds = time_t(time)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(cString: buffer)
    }
}
