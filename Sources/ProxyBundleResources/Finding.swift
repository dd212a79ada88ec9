/// Something a patch holds that never takes effect, or that changes more than it seems to.
public struct Finding: Equatable, Sendable {
    public enum Kind: String, Sendable {
        /// An image variant, where some devices load a variant of a layer below instead.
        case image
        /// A localized file that a global file of the same name always beats.
        case localized
        /// A whiteout with nothing below it to hide.
        case whiteout
        /// A name that differs only in letter case from one below it: both show.
        case letterCase = "case"
        /// Under casefold, an entry of a layer that another spelling of its name in the same
        /// directory of that layer (the first in byte order) keeps from showing.
        case spelling
        /// A global file added over localized copies below: every language now gets it.
        case overridesLocalized = "overrides-localized"
        /// A whiteout, or a new `.lproj`, that moves languages to another localization's files.
        case movesLanguage = "moves-language"
        /// A file in a `.lproj` no language's search list reaches before another spelling's.
        case unreachableLocalization = "unreachable-localization"
        /// A generic file that a `~ipad`/`~iphone` twin below replaces on that idiom.
        case deviceTwin = "device-twin"
        /// A loose image that the asset catalog serves instead.
        case catalog
        /// A source file (`.xib`, `.storyboard`, `.xcassets`, `.xcstrings`): the app loads
        /// only its compiled form.
        case sourceOnly = "source-only"
        /// An asset catalog this reader does not understand: loose images were not checked.
        case unreadableCatalog = "unreadable-catalog"
    }

    public var kind: Kind
    /// The layer holding it (an index of the tree's layers) and its path there.
    public var layer: Int
    public var path: String
    /// What shows or loads instead, and its layer.
    public var other: String?
    public var otherLayer: Int?
    /// The devices it concerns (none: every device, or devices do not matter).
    public var devices: [Device] = []
    /// The languages it concerns (none: every language, or languages do not matter).
    public var languages: [String] = []
    /// More words: what moves where, what the catalog holds, what the compiled form is.
    public var detail: String?
    /// The bundle inside the app whose rules it was found by (its path in the tree), nil for
    /// the main bundle; paths in `detail` are relative to its resources directory.
    public var bundle: String?

    /// The finding in words, `role(layer)` naming a layer; `checked` are the devices `check`
    /// looked at (all of them: "every device"). A finding in a bundle inside the app names it.
    public func text(checked: [Device] = Device.checked, _ role: (Int) -> String) -> String {
        let place = "\(path) (\(role(layer))\(bundle.map { ", bundle " + $0 } ?? ""))"
        let other = "\(self.other ?? "?") from \(otherLayer.map(role) ?? "?")"
        let which = Set(devices) == Set(checked) ? "every device" : Finding.describe(devices, checked: checked) + " devices"
        switch kind {
        case .image:
            return "\(place): on \(which), \(other) loads instead"
        case .localized:
            return "\(place): never loads, the global \(other) always comes first"
        case .whiteout:
            return "\(place): a whiteout that hides nothing below it"
        case .letterCase:
            return "\(place): differs only in letter case from \(other); both show, nothing is replaced"
        case .spelling:
            return "\(place): never shows under casefold, \(self.other ?? "?") of the same layer has its name"
        case .overridesLocalized:
            return "\(place): a global file over localized copies below; \(languageWords) now load it instead of \(detail ?? "?")"
        case .movesLanguage:
            return "\(place): changes the localization languages get: \(detail ?? "?")"
        case .unreachableLocalization:
            return "\(place): never loads, for \(languageWords) \(other) comes first"
        case .deviceTwin:
            return "\(place): on \(which), \(other) loads instead"
        case .catalog:
            return "\(place): never loads on \(which), \(other) has it (\(detail ?? "?"))"
        case .sourceOnly:
            return "\(place): never loads, the app loads only its compiled form (\(detail ?? "?"))"
        case .unreadableCatalog:
            return "\(place): \(detail ?? "unreadable"); loose images were not checked against it"
        }
    }

    /// `fr, fr-CA` or `every language`.
    var languageWords: String {
        languages.isEmpty ? "every language" : languages.joined(separator: ", ")
    }

    /// `scale 3`, `scale 2 tall-phone`, `scale 2 pad, scale 3 pad`... for a set of devices of
    /// those `checked`: a scale alone when every kind of device checked at that scale is in it.
    static func describe(_ devices: [Device], checked: [Device]) -> String {
        let order = ["phone", "tall-phone", "pad", "none"]
        func kinds(_ list: [Device], _ scale: Int) -> [String] {
            Set(list.filter { $0.scale == scale }.map(\.kind)).sorted { (order.firstIndex(of: $0) ?? 9, $0) < (order.firstIndex(of: $1) ?? 9, $1) }
        }
        var words: [String] = []
        for scale in Set(devices.map(\.scale)).sorted() {
            let found = kinds(devices, scale)
            if Set(found) == Set(kinds(checked, scale)) {
                words.append("scale \(scale)")
            } else {
                words += found.map { "scale \(scale) " + ($0 == "none" ? "(no idiom)" : $0) }
            }
        }
        return words.joined(separator: ", ")
    }
}
