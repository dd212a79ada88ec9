#if canImport(Glibc)
import Glibc
#endif

/// Why a layer was not extracted: the entry (as the archive names it) and the rule it broke.
public struct LayerRefusal: Error, CustomStringConvertible {
    public let entry: [UInt8]
    public let rule: String

    public init(entry: [UInt8], rule: String) {
        self.entry = entry
        self.rule = rule
    }

    public var description: String {
        let shown = String(decoding: entry.prefix(200), as: UTF8.self) + (entry.count > 200 ? "..." : "")
        return entry.isEmpty ? rule : "entry '\(shown)': \(rule)"
    }
}

/// A failure of the delivery code that is not a layer's fault (a file, a process, the store).
public struct DeliveryError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }

    /// `what` failed with error number `code`: "what: the error's text".
    init(_ what: String, errno code: Int32) {
        self.init("\(what): \(DeliveryError.text(of: code))")
    }

    /// The text of error number `code` (strerror), the one place Delivery turns one into text.
    static func text(of code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return String(cString: text)
    }
}
