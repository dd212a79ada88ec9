/// What is written to the control files, read: the lines of `.invalidate` and `.layers`, the
/// options of `.remount` (see `ControlFile`). Anyone who may write to the mount writes these
/// bytes, so they are untrusted input (fuzzed: `Scripts/fuzz.sh control`); the FUSE side
/// applies what they ask.
public enum ControlInput {
    /// The non-empty lines of what was written, without surrounding blanks (space, tab, CR).
    public static func lines(_ text: [UInt8]) -> [[UInt8]] {
        text.split(separator: UInt8(ascii: "\n")).map { trimmed($0) }.filter { !$0.isEmpty }
    }

    /// The patch directories a write to `.layers` names, highest priority first (one absolute
    /// path a line, as bytes: one that is not UTF-8 is opened as it was written). EINVAL for a
    /// relative path, a NUL byte, or a path inside the mount.
    public static func patchPaths(_ text: [UInt8], mountpoint: RawPath) throws(Errno) -> [RawPath] {
        try lines(text).map { line throws(Errno) in
            let path = RawPath(bytes: line)
            guard path.isAbsolute, !line.contains(0), !path.isInside(mountpoint) else { throw Errno.invalid }
            return path
        }
    }

    private static func trimmed(_ line: ArraySlice<UInt8>) -> [UInt8] {
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
        guard let first = line.firstIndex(where: { !blank($0) }), let last = line.lastIndex(where: { !blank($0) }) else { return [] }
        return Array(line[first...last])
    }
}

/// A write to `.remount`: comma- (or newline-) separated options from what a remount may
/// change on a live mount (`ro`, `rw`, `entry_timeout=`, `attr_timeout=`, `negative_timeout=`,
/// in seconds); all of them are taken, or, when one is not from that set or its value is not
/// a number of seconds, none (EINVAL).
public struct RemountRequest: Equatable, Sendable {
    public var readOnly: Bool?
    public var entry: Double?
    public var attribute: Double?
    public var negative: Double?

    public init(_ data: [UInt8]) throws(Errno) {
        let text = String(decoding: data, as: UTF8.self)
        let options = text.split(whereSeparator: { $0 == "," || $0 == "\n" }).map { $0.trimmingSpaces }
        for option in options where !option.isEmpty {
            // "=" is two empty parts, not none (found by fuzzing: it crashed the daemon)
            let parts = option.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let value = parts.count == 2 ? RemountRequest.seconds(parts[1]) : nil
            switch (parts[0], parts.count, value) {
            case ("ro", 1, _): readOnly = true
            case ("rw", 1, _): readOnly = false
            case ("entry_timeout", 2, let v?): entry = v
            case ("attr_timeout", 2, let v?): attribute = v
            case ("negative_timeout", 2, let v?): negative = v
            default: throw Errno.invalid
            }
        }
    }

    private static func seconds(_ text: String) -> Double? {
        guard let number = Double(text), number.isFinite, number >= 0 else { return nil }
        return number
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
