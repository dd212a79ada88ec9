#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// `.remount`: reading it gives the state as `-o` options
/// (`rw,entry_timeout=86400,attr_timeout=86400,negative_timeout=86400`); writing some of them
/// changes them (`RemountRequest` reads what was written). The kernel's per-mount read-only
/// flag is the command's to set (`proxybundle remount`); this is the daemon's own.
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
        if request.readOnly == false && overlay.currentLayers.substitution == nil { throw Errno.readOnly }
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
