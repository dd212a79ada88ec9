/// What a program asks a bundle for: NSBundle's `path(forResource:ofType:inDirectory:)`, or,
/// with `image`, UIImage's `imageNamed:` on a device with those traits.
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
    /// The device an image is looked up for; nil for a plain resource.
    public var image: Device?
    /// The idiom of an iOS device, whose `~ipad`/`~iphone` variants replace the generic
    /// name (every kind of resource); an image's device gives its own. Nil: not an iOS device.
    public var idiom: Device.Idiom?

    public init(name: String, type: String? = nil, subdirectory: String = "", languages: [String] = [],
                image: Device? = nil, idiom: Device.Idiom? = nil) {
        self.name = name
        self.type = type
        self.subdirectory = subdirectory
        self.languages = languages
        self.image = image
        self.idiom = idiom
    }

    /// The preferred languages the search list is made from.
    public var preferred: [String] { languages.isEmpty ? ["en"] : languages }

    /// The idiom whose variants replace generic names.
    public var product: Device.Idiom? { image?.idiom ?? idiom }

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

    /// The names tried in each location, in order: the name itself, or for an image every
    /// variant the device would load (see `ImageName.candidates`).
    public var fileNames: [String] {
        let fileName = place.fileName
        guard let device = image else { return [fileName] }
        return ImageName(fileName).candidates(for: device)
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
    public var idiom: Idiom
    /// A 4-inch phone, which looks for `-568h` variants first.
    public var tall: Bool

    public init(scale: Int = 1, idiom: Idiom = .phone, tall: Bool = false) {
        self.scale = scale
        self.idiom = idiom
        self.tall = tall
    }

    /// The devices `proxybundle check` considers unless told otherwise: those current iOS
    /// versions run on, scale 2 and 3, phone and pad.
    public static let checked: [Device] = [2, 3].flatMap { scale in Idiom.allCases.map { Device(scale: scale, idiom: $0) } }

    /// Every device: scale 1, 2, 3 × phone, pad × tall or not.
    public static let all: [Device] = [1, 2, 3].flatMap { scale in
        Idiom.allCases.flatMap { idiom in [false, true].map { Device(scale: scale, idiom: idiom, tall: $0) } }
    }

    public var description: String { "scale \(scale) \(idiom.rawValue)\(tall ? " tall" : "")" }
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
    /// before the plain one. A name that names a variant is only itself.
    public func candidates(for device: Device) -> [String] {
        if hasVariant { return [fileName(scale: scale ?? 1, idiom: idiom, tall: tall)] }
        let scales = Array((1...max(1, min(3, device.scale))).reversed()) + Array(stride(from: device.scale + 1, through: 3, by: 1))
        return scales.flatMap { scale in
            (device.tall ? [true, false] : [false]).flatMap { tall in
                [fileName(scale: scale, idiom: device.idiom, tall: tall), fileName(scale: scale, idiom: nil, tall: tall)]
            }
        }
    }
}
