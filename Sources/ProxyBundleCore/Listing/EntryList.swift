#if canImport(Glibc)
import Glibc
#endif

/// The entries of a directory, their names kept in one buffer, each followed by a NUL (so a
/// name is also a C string). Listing 20,000 names allocates a few times rather than once per
/// name, and copies no name to hash, compare or pack it.
public struct EntryList: Sendable {
    public struct Entry: Sendable {
        /// The inode number: in the layer's file system for a layer's entries, as the mount
        /// reports it for a merged listing.
        public var inode: UInt64
        /// Where the name starts in the buffer.
        let start: UInt32
        /// The layer the entry was read from: in a merged listing, the highest layer that has
        /// the name (no layer above it has the name or a whiteout for it).
        public var layer: UInt16
        /// The name's length in bytes (at most 255).
        public let length: UInt8
        /// The `d_type` (its low four bits) and the flags (the high ones), in one byte so that
        /// an entry stays 16 bytes.
        private var typeAndFlags: UInt8

        init(start: UInt32, length: UInt8, type: UInt8, inode: UInt64, layer: UInt16) {
            self.inode = inode
            self.start = start
            self.length = length
            self.layer = layer
            self.typeAndFlags = type & Self.typeMask
        }

        private static let typeMask: UInt8 = 0x0F
        private static let whiteoutDeviceFlag: UInt8 = 0x80

        /// A `d_type` value.
        public var type: UInt8 {
            get { typeAndFlags & Self.typeMask }
            set { typeAndFlags = typeAndFlags & ~Self.typeMask | newValue & Self.typeMask }
        }

        /// Whether a layer's entry is a whiteout device (character device 0/0).
        var isWhiteoutDevice: Bool {
            get { typeAndFlags & Self.whiteoutDeviceFlag != 0 }
            set { typeAndFlags = newValue ? typeAndFlags | Self.whiteoutDeviceFlag : typeAndFlags & ~Self.whiteoutDeviceFlag }
        }
    }

    public private(set) var entries: [Entry] = []
    private var bytes: [UInt8] = []

    public init() {}

    public var isEmpty: Bool { entries.isEmpty }

    /// The bytes the names take, with their NULs.
    var nameBytes: Int { bytes.count }

    /// Makes room for `more` entries whose names take `moreBytes` bytes in all, so that a
    /// large listing is not copied each time its buffers double.
    mutating func reserve(_ more: Int, nameBytes moreBytes: Int) {
        entries.reserveCapacity(entries.count + more)
        bytes.reserveCapacity(bytes.count + moreBytes)
    }

    /// Adds an entry. A directory whose names fill 4 GiB is listed up to there (offsets are
    /// 32-bit); a name is at most 255 bytes (NAME_MAX: a longer one is not listed).
    mutating func append(_ name: UnsafeRawBufferPointer, type: UInt8, inode: UInt64, layer: Int = 0) {
        guard let start = UInt32(exactly: bytes.count), let length = UInt8(exactly: name.count),
              bytes.count + name.count < Int(UInt32.max) else { return }
        bytes.append(contentsOf: name)
        bytes.append(0)
        entries.append(Entry(start: start, length: length, type: type, inode: inode,
                             layer: UInt16(truncatingIfNeeded: layer)))
    }

    mutating func append(_ name: [UInt8], type: UInt8, inode: UInt64, layer: Int = 0) {
        name.withUnsafeBytes { append($0, type: type, inode: inode, layer: layer) }
    }

    /// Replaces the entry at `index` (its name stays).
    mutating func update(_ index: Int, _ change: (inout Entry) -> Void) {
        change(&entries[index])
    }

    /// Keeps only the entries `keep` accepts.
    mutating func filter(_ keep: (Entry, UnsafeRawBufferPointer) -> Bool) {
        let kept = withNames { names in entries.filter { keep($0, names.name($0)) } }
        entries = kept
    }

    /// The name of `entry`, copied.
    public func name(_ entry: Entry) -> [UInt8] {
        withNames { Array($0.name(entry)) }
    }

    /// Runs `body` with the buffer of names, valid for as long as `body` runs.
    public func withNames<T, E: Error>(_ body: (Names) throws(E) -> T) throws(E) -> T {
        let result = bytes.withUnsafeBytes { raw in
            // with no entries, no name is ever read at the base
            Result { () throws(E) -> T in try body(Names(base: raw.baseAddress ?? Self.nowhere)) }
        }
        return try result.get()
    }

    nonisolated(unsafe) private static let nowhere = UnsafeRawPointer(UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1))

    /// A view of the buffer of names.
    public struct Names {
        let base: UnsafeRawPointer

        public func name(_ entry: Entry) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: base + Int(entry.start), count: Int(entry.length))
        }

        /// The name as a C string.
        public func cString(_ entry: Entry) -> UnsafePointer<CChar> {
            (base + Int(entry.start)).assumingMemoryBound(to: CChar.self)
        }
    }
}

extension EntryList {
    /// Whether a name is "." or "..".
    public static func isDotOrDotDot(_ name: UnsafeRawBufferPointer) -> Bool {
        name.count <= 2 && name.count > 0 && name.allSatisfy { $0 == 0x2E }
    }
}

/// A set of names that live in buffers which outlive it (a listing's names, while it is
/// merged): open addressing over the names' own bytes, nothing copied, hashed by `NameHash`.
struct NameSet {
    private var slots: [UnsafeRawBufferPointer?]
    private var mask: Int
    private var count = 0

    /// A set sized for `capacity` names; it grows past that, staying at most half full so that
    /// a free slot always ends a probe.
    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size *= 2 }
        slots = Array(repeating: nil, count: size)
        mask = size - 1
    }

    var isEmpty: Bool { count == 0 }

    mutating func insert(_ name: UnsafeRawBufferPointer) {
        var index = Self.hash(name) & mask
        while let slot = slots[index] {
            if Self.equal(slot, name) { return }
            index = (index + 1) & mask
        }
        slots[index] = name
        count += 1
        if count * 2 > slots.count { grow() }
    }

    private mutating func grow() {
        let names = slots.compactMap { $0 }
        slots = Array(repeating: nil, count: slots.count * 2)
        mask = slots.count - 1
        count = 0
        for name in names { insert(name) }
    }

    func contains(_ name: UnsafeRawBufferPointer) -> Bool {
        var index = Self.hash(name) & mask
        while let slot = slots[index] {
            if Self.equal(slot, name) { return true }
            index = (index + 1) & mask
        }
        return false
    }

    private static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard let x = a.baseAddress, let y = b.baseAddress else { return true }
        return memcmp(x, y, a.count) == 0
    }

    private static func hash(_ name: UnsafeRawBufferPointer) -> Int {
        Int(truncatingIfNeeded: NameHash.hash(name, lowering: false))
    }
}
