/// What a program asks a bundle for: NSBundle's `path(forResource:ofType:inDirectory:)`, or,
/// with a `scale`, UIImage's `imageNamed:` on a device of that scale.
public struct ResourceQuery: Equatable, Sendable {
    /// The name; a `/` in it moves its directory part into `subdirectory`.
    public var name: String
    /// The type (extension) added to `name`, with or without its leading dot (`png`, `.png`).
    public var type: String?
    /// A directory within the resources directory (and within each `.lproj`).
    public var subdirectory: String
    /// The user's preferred languages, most preferred first (`fr-CA`, `en`); none: `en`, which
    /// is what CoreFoundation assumes when no preference is set.
    public var languages: [String]
    /// The device's scale when the name is an image (1, 2, 3); nil for a plain resource.
    public var scale: Int?
    /// A 4-inch phone, for an image: `-568h` variants first.
    public var tall: Bool
    /// Whose `~ipad`/`~iphone` variants replace the generic name (every kind of resource): the
    /// device the bundle is made for unless told (`ResourceBundle.idiom(for:)`).
    public var idiom: IdiomChoice

    public init(name: String, type: String? = nil, subdirectory: String = "", languages: [String] = [],
                scale: Int? = nil, tall: Bool = false, idiom: IdiomChoice = .bundle) {
        self.name = name
        self.type = type
        self.subdirectory = subdirectory
        self.languages = languages
        self.scale = scale
        self.tall = tall
        self.idiom = idiom
    }

    /// The preferred languages the search list is made from.
    public var preferred: [String] { languages.isEmpty ? ["en"] : languages }

    /// The directory the name is searched in (below each location), and the name looked up:
    /// `NAME.TYPE`, or `NAME.TYPE` for a type given as `.TYPE` (`_CFBundleCopyFindResources`).
    public var place: (subdirectory: String, fileName: String) {
        let (directory, last) = ResourcePath.split(name)
        var fileName = last
        if let type, !type.isEmpty { fileName += type.hasPrefix(".") ? type : "." + type }
        return (ResourcePath.join(ResourcePath.names(subdirectory).joined(separator: "/"), directory), fileName)
    }

    /// Whether the name and subdirectory stay inside the resources directory: one that climbs
    /// out with `..` finds nothing (`_CFBundleCopyFindResources`), nor does an absolute one.
    public var staysInside: Bool {
        !name.hasPrefix("/") && !subdirectory.hasPrefix("/") && !ResourcePath.names(name).contains("..")
            && !ResourcePath.names(subdirectory).contains("..")
    }

    /// The device an image is looked up for, on a device of `idiom`; nil for a plain resource.
    public func device(idiom: Device.Idiom?) -> Device? {
        scale.map { Device(scale: $0, idiom: idiom, tall: tall) }
    }

    /// The names tried in each location, in order, on a device of `idiom`: the name itself, or
    /// for an image every variant the device would load (see `ImageName.candidates`).
    public func fileNames(idiom: Device.Idiom?) -> [String] {
        let fileName = place.fileName
        guard let device = device(idiom: idiom) else { return [fileName] }
        return ImageName(fileName).candidates(for: device)
    }
}

/// Which device's `~iphone`/`~ipad` variants a lookup takes.
public enum IdiomChoice: Hashable, Sendable {
    /// The device the bundle (its app) is made for, as its Info.plist and layout say
    /// (`ResourceBundle.madeFor`).
    case bundle
    /// This idiom's.
    case idiom(Device.Idiom)
    /// None: no variant replaces a generic name (a Mac, or a bundle read as it is).
    case none

    public static let phone = IdiomChoice.idiom(.phone)
    public static let pad = IdiomChoice.idiom(.pad)

    /// `phone`, `pad` or `none`, as the command line spells them.
    public init?(word: String) {
        switch word {
        case "none": self = .none
        default:
            guard let idiom = Device.Idiom(rawValue: word) else { return nil }
            self = .idiom(idiom)
        }
    }
}

/// The traits of a device UIImage picks image variants by.
public struct Device: Hashable, Sendable, CustomStringConvertible {
    public enum Idiom: String, CaseIterable, Sendable {
        case phone
        case pad

        /// The suffix of its variants: `~iphone`, `~ipad`.
        public var suffix: String { self == .phone ? "iphone" : "ipad" }
    }

    /// 1, 2 or 3.
    public var scale: Int
    /// Whose `~iphone`/`~ipad` variants it takes; nil: none (a Mac).
    public var idiom: Idiom?
    /// A 4-inch phone, which looks for `-568h` variants first.
    public var tall: Bool

    public init(scale: Int = 1, idiom: Idiom? = .phone, tall: Bool = false) {
        self.scale = scale
        self.idiom = idiom
        self.tall = tall
    }

    /// The devices `proxybundle check` considers for an iOS app made for phones and pads unless
    /// told otherwise: those current iOS versions run on, scale 2 and 3, phone and pad.
    public static let checked: [Device] = [2, 3].flatMap { scale in Idiom.allCases.map { Device(scale: scale, idiom: $0) } }

    /// Every iOS device: scale 1, 2, 3 × phone, pad, and the 4-inch phone (`tallPhone`).
    public static let all: [Device] = [1, 2, 3].flatMap { scale in Idiom.allCases.map { Device(scale: scale, idiom: $0) } }
        + [tallPhone]

    /// The 4-inch phone (iPhone 5 to SE, iPod touch 5 to 7): every one is scale 2.
    public static let tallPhone = Device(scale: 2, idiom: .phone, tall: true)

    /// The devices `check` looks at in an app made for `madeFor` (`ResourceBundle.madeFor`),
    /// unless told: a Mac's scales 1 and 2 without an idiom; else scale 2 and 3 of each idiom
    /// the app is made for (phone and pad when it does not say); `tall` adds the 4-inch phone.
    public static func checked(madeFor: [Device.Idiom]?, tall: Bool = false) -> [Device] {
        let devices: [Device]
        if let madeFor, madeFor.isEmpty {
            devices = [1, 2].map { Device(scale: $0, idiom: nil) }
        } else {
            let idioms = madeFor ?? Idiom.allCases
            devices = [2, 3].flatMap { scale in idioms.map { Device(scale: scale, idiom: $0) } }
        }
        return devices + (tall ? [tallPhone] : [])
    }

    /// Its kind as `check --idioms` names it: `phone`, `pad`, `tall-phone`, `none`.
    public var kind: String {
        guard let idiom else { return tall ? "tall" : "none" }
        return (tall ? "tall-" : "") + idiom.rawValue
    }

    /// `scale 2 phone`, `scale 2 tall-phone`, `scale 1` (no idiom).
    public var description: String { idiom == nil && !tall ? "scale \(scale)" : "scale \(scale) \(kind)" }
}

/// An image file's name split into its base and variant suffixes: `icon-568h@2x~ipad.png` is
/// `icon`, tall, scale 2, pad, `png`.
public struct ImageName: Equatable, Sendable {
    public var base: String
    public var tall = false
    public var scale: Int? = nil
    public var idiom: Device.Idiom? = nil
    /// The extension; `png` when the name has none.
    public var type: String

    /// The image extensions UIImage loads, which `check` looks at.
    public static let types: Set<String> = ["png", "jpg", "jpeg", "gif", "tif", "tiff", "bmp", "heic", "heif", "webp", "ico"]

    public init(_ fileName: String) {
        var stem = Substring(fileName)
        type = "png"
        if let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex {
            stem = fileName[..<dot]
            type = String(fileName[fileName.index(after: dot)...])
        }
        for idiom in Device.Idiom.allCases where stem.hasSuffix("~" + idiom.suffix) {
            self.idiom = idiom
            stem = stem.dropLast(idiom.suffix.count + 1)
        }
        if stem.count > 3, stem.hasSuffix("x"), let at = stem.dropLast(2).last, at == "@",
           let digit = stem.dropLast().last?.wholeNumberValue {
            scale = digit
            stem = stem.dropLast(3)
        }
        if stem.count > 5, stem.hasSuffix("-568h") {
            tall = true
            stem = stem.dropLast(5)
        }
        base = String(stem)
    }

    /// Whether the name already names one variant, and is then looked up as given.
    public var hasVariant: Bool { tall || scale != nil || idiom != nil }

    /// The file name of this base's variant for the given suffixes.
    public func fileName(scale: Int, idiom: Device.Idiom?, tall: Bool) -> String {
        base + (tall ? "-568h" : "") + (scale == 1 ? "" : "@\(scale)x") + (idiom.map { "~" + $0.suffix } ?? "") + "." + type
    }

    /// The file names UIImage tries for `device`, in order: for each scale from the device's
    /// down to 1 and then up to 3, the tall variants first (on a tall device), the idiom's
    /// before the plain one (a device without an idiom: the plain one only). A name that names
    /// a variant is only itself.
    public func candidates(for device: Device) -> [String] {
        if hasVariant { return [fileName(scale: scale ?? 1, idiom: idiom, tall: tall)] }
        let scales = Array((1...max(1, min(3, device.scale))).reversed()) + Array(stride(from: device.scale + 1, through: 3, by: 1))
        let idioms: [Device.Idiom?] = device.idiom.map { [$0, nil] } ?? [nil]
        return scales.flatMap { scale in
            (device.tall ? [true, false] : [false]).flatMap { tall in
                idioms.map { fileName(scale: scale, idiom: $0, tall: tall) }
            }
        }
    }
}
