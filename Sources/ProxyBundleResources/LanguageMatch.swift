#if canImport(Glibc)
import Glibc
#endif
import _FoundationICU

/// Apple's own language matcher, called as CoreFoundation calls it. The Swift toolchain ships
/// Apple's fork of ICU (`_FoundationICU`), whose `ualoc_localizationsToUse` (ualoc.cpp) is the
/// function `CFBundle` asks which localizations to use: the first preferred language that
/// matches any localization (after normalising `-`/`_` and case, aliases such as `iw`→`he`,
/// `zh_CN`→`zh_Hans_CN`, legacy names such as `English`), or one of its parents (Apple's, such as
/// `en_IN`→`en_GB`, and CLDR's, such as `es_MX`→`es_419`), or a match through likely subtags
/// (`hi` finds `hi-IN`); followed by the parents of that match the bundle has. Calling it is
/// exact by construction; docs/DESIGN.md says what it costs.
public enum LanguageMatch {
    /// The localizations of `available` to use for `preferred`, most preferred first, as
    /// `_CFBundleCreateMutableArrayOfFallbackLanguages` (CFBundle_Locale.c) returns them: empty
    /// when nothing matches, and, as there, when either list is empty or holds a name that is
    /// not ASCII or is too long for ICU (`ULOC_FULLNAME_CAPACITY`).
    public static func localizationsToUse(preferred: [String], available: [String]) -> [String] {
        guard !preferred.isEmpty, !available.isEmpty,
              let preferredNames = CStrings(preferred), let availableNames = CStrings(available) else { return [] }
        var chosen = [UnsafePointer<CChar>?](repeating: nil, count: 512)
        var status = U_ZERO_ERROR
        let count = preferredNames.pointers.withUnsafeBufferPointer { preferredBuffer in
            availableNames.pointers.withUnsafeBufferPointer { availableBuffer in
                ualoc_localizationsToUse(preferredBuffer.baseAddress, Int32(preferredBuffer.count),
                                         availableBuffer.baseAddress, Int32(availableBuffer.count),
                                         &chosen, Int32(chosen.count), &status)
            }
        }
        guard status.rawValue <= U_ZERO_ERROR.rawValue, count > 0 else { return [] }
        return chosen.prefix(Int(count)).compactMap { $0.map { String(cString: $0) } }
    }

    /// ICU's canonical form of a locale name (`uloc_canonicalize`: `zh-hant_tw` is
    /// `zh_Hant_TW`), or nil when ICU cannot make one. What CoreFoundation's "canonical form"
    /// comparisons are modelled by (see `Localizations.found(_:in:)`).
    public static func canonical(_ name: String) -> String? {
        guard name.utf8.allSatisfy({ $0 < 0x80 }), name.utf8.count < Int(ULOC_FULLNAME_CAPACITY) else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(ULOC_FULLNAME_CAPACITY) + 1)
        var status = U_ZERO_ERROR
        let length = swift_uloc_canonicalize(name, &buffer, Int32(buffer.count - 1), &status)
        guard status.rawValue <= U_ZERO_ERROR.rawValue, length > 0, Int(length) < buffer.count else { return nil }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// C copies of ASCII names short enough for ICU, freed with the value.
    private final class CStrings {
        let pointers: [UnsafePointer<CChar>?]
        private let storage: [UnsafeMutablePointer<CChar>]

        init?(_ names: [String]) {
            guard names.allSatisfy({ $0.utf8.allSatisfy { $0 < 0x80 } && $0.utf8.count < Int(ULOC_FULLNAME_CAPACITY) }) else {
                return nil
            }
            var storage: [UnsafeMutablePointer<CChar>] = []
            for name in names {
                let bytes = Array(name.utf8CString)
                let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
                copy.initialize(from: bytes, count: bytes.count)
                storage.append(copy)
            }
            self.storage = storage
            pointers = storage.map { UnsafePointer($0) }
        }

        deinit {
            for pointer in storage { pointer.deallocate() }
        }
    }
}
