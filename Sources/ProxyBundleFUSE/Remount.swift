#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// `.remount`: what a remount may change on a live mount. Reading it gives the state as `-o`
/// options (`rw,entry_timeout=86400,attr_timeout=86400,negative_timeout=86400`); writing
/// comma-separated options from the same set changes them, all or, when one is not from that
/// set or its value is not a number of seconds, none (EINVAL). The kernel's per-mount
/// read-only flag is the command's to set (`proxybundle remount`); this is the daemon's own.
struct RemountRequest: Equatable {
    var readOnly: Bool?
    var entry: Double?
    var attribute: Double?
    var negative: Double?

    init(_ data: [UInt8]) throws(Errno) {
        let text = String(decoding: data, as: UTF8.self)
        let options = text.split(whereSeparator: { $0 == "," || $0 == "\n" }).map { $0.trimmingSpaces }
        for option in options where !option.isEmpty {
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
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

extension FuseServer {
    /// The text of `.remount`.
    var remountText: String {
        let timeouts = self.timeouts
        let mode = overlay.isWritable ? "rw" : "ro"
        return "\(mode),entry_timeout=\(timeouts.entry.secondsText),attr_timeout=\(timeouts.attribute.secondsText),"
            + "negative_timeout=\(timeouts.negative.secondsText)\n"
    }

    /// Applies a write to `.remount`. Made writable, the mount first takes the substitution's
    /// writer claim (EBUSY when another mount writes it). New timeouts apply to what the kernel
    /// is told from now on; what it holds under the old ones is forgotten (an invalidation).
    func remount(_ data: [UInt8]) throws(Errno) {
        let request = try RemountRequest(data)
        // a stack without a substitution has nowhere to write: never made writable
        if request.readOnly == false && overlay.layers.substitution == nil { throw Errno.readOnly }
        if request.readOnly == false && !overlay.isWritable && !claimsSubstitution() { throw Errno(EBUSY) }
        let changed = currentTimeouts.withLock { timeouts -> Bool in
            let before = timeouts
            timeouts.entry = request.entry ?? timeouts.entry
            timeouts.attribute = request.attribute ?? timeouts.attribute
            timeouts.negative = request.negative ?? timeouts.negative
            return timeouts != before
        }
        if let readOnly = request.readOnly, readOnly == overlay.isWritable {
            try overlay.setWritable(!readOnly)
            logger.info("remounted \(readOnly ? "read-only" : "read-write")")
        }
        if changed {
            let timeouts = self.timeouts
            logger.info("cache timeouts now: entry \(timeouts.entry.secondsText) s, attributes \(timeouts.attribute.secondsText) s, missing names \(timeouts.negative.secondsText) s")
            // everything, as `proxybundle invalidate --all`: what the kernel holds was cached
            // under the old timeouts whether it changed or not
            try invalidate(Array("/".utf8))
        }
    }
}

extension Double {
    /// Seconds as an option value: `5`, or `0.5`.
    public var secondsText: String {
        self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self)
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
