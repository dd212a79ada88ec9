/// A bundle in a tree, and the lookup rules of NSBundle and UIImage over it (those of Apple's
/// Foundation, GNUstep's and swift-corelibs-foundation's alike):
///
///     let tree = try DirectoryTree(path: "/mnt/myapp")          // or a LayeredTree
///     let bundle = ResourceBundle(tree: tree)
///     let query = ResourceQuery(name: "Images/icon", type: "png", image: Device(scale: 3))
///     bundle.resolve(query)                                      // "Images/icon@3x.png"
public struct ResourceBundle {
    public let tree: ResourceTree
    /// Where the bundle is in the tree (`""`: the tree is the bundle).
    public let path: String
    /// Its resources directory: `Contents/Resources` (macOS), else `Resources` (OPENSTEP and
    /// GNUstep), else the bundle itself (iOS).
    public let resources: String
    /// `CFBundleDevelopmentRegion` of its `Info.plist`; `en` when it has none.
    public let developmentRegion: String

    public init(tree: ResourceTree, path: String = "") {
        self.tree = tree
        self.path = path
        let macOS = ResourcePath.join(path, "Contents/Resources")
        let openStep = ResourcePath.join(path, "Resources")
        let infoFiles: [String]
        if tree.kind(of: macOS) == .directory {
            resources = macOS
            infoFiles = [ResourcePath.join(path, "Contents/Info.plist")]
        } else if tree.kind(of: openStep) == .directory {
            resources = openStep
            infoFiles = [ResourcePath.join(openStep, "Info-gnustep.plist"), ResourcePath.join(openStep, "Info.plist"),
                         ResourcePath.join(path, "Info.plist")]
        } else {
            resources = path
            infoFiles = [ResourcePath.join(path, "Info.plist")]
        }
        let info = infoFiles.first { tree.kind(of: $0) == .file }.flatMap { tree.contents(of: $0, limit: 1 << 20) }
        developmentRegion = info.flatMap { PropertyList.string("CFBundleDevelopmentRegion", in: $0) } ?? "en"
    }

    /// The directories searched, in order, each with `subdirectory` below it: the resources
    /// directory (global resources win), each preferred language's `.lproj` directories,
    /// `Base.lproj`, then the development region's unless already tried.
    public func locations(subdirectory: String, languages: [String]) -> [String] {
        var lproj: [String] = []
        for language in languages { Localization.directories(for: language, into: &lproj) }
        if !lproj.contains("Base.lproj") { lproj.append("Base.lproj") }
        Localization.directories(for: developmentRegion, into: &lproj)
        return ([resources] + lproj.map { ResourcePath.join(resources, $0) }).map { ResourcePath.join($0, subdirectory) }
    }

    /// One file tried: its path in the tree, and whether it is a resource (a regular file, or
    /// a symlink to one).
    public struct Candidate: Equatable, Sendable {
        public var path: String
        public var exists: Bool

        public init(path: String, exists: Bool) {
            self.path = path
            self.exists = exists
        }
    }

    /// Every file `query` tries, in order: the locations outside, the file names inside.
    public func candidates(for query: ResourceQuery) -> [Candidate] {
        let (subdirectory, _) = query.place
        let names = query.fileNames
        return locations(subdirectory: subdirectory, languages: query.languages).flatMap { location in
            names.map { name in
                let path = ResourcePath.join(location, name)
                return Candidate(path: path, exists: tree.kind(of: path) == .file)
            }
        }
    }

    /// The path (in the tree) of the file `query` loads: in the first location that has any of
    /// the file names, the first of them. Nil when no location has one.
    public func resolve(_ query: ResourceQuery) -> String? {
        let (subdirectory, _) = query.place
        let names = query.fileNames
        for location in locations(subdirectory: subdirectory, languages: query.languages) {
            for name in names where tree.kind(of: ResourcePath.join(location, name)) == .file {
                return ResourcePath.join(location, name)
            }
        }
        return nil
    }

    /// The `*.bundle` directories right in the resources directory, in byte order of their
    /// names: where `imageNamed:` across resource bundles (CocoaPods') looks next.
    public var nestedBundles: [ResourceBundle] {
        tree.names(in: resources)
            .filter { $0.hasSuffix(".bundle") && tree.kind(of: ResourcePath.join(resources, $0)) == .directory }
            .sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            .map { ResourceBundle(tree: tree, path: ResourcePath.join(resources, $0)) }
    }

    /// This bundle and, with `nested`, its resource bundles after it: the order `resolve(_:in:)`
    /// searches them.
    public func searched(nested: Bool) -> [ResourceBundle] {
        nested ? [self] + nestedBundles : [self]
    }

    /// The file `query` loads from this bundle or, with `nested`, from the first of its resource
    /// bundles that has one.
    public func resolve(_ query: ResourceQuery, nested: Bool) -> String? {
        for bundle in searched(nested: nested) {
            if let path = bundle.resolve(query) { return path }
        }
        return nil
    }
}

/// The `.lproj` directory names of a language.
public enum Localization {
    /// The names NSBundle used before ISO codes, tried right after the code.
    public static let legacyNames = ["en": "English", "fr": "French", "de": "German", "es": "Spanish",
                                     "it": "Italian", "ja": "Japanese", "nl": "Dutch"]

    /// Appends `language`'s directories not yet in `list`: `fr-CA.lproj`, `fr_CA.lproj`, then
    /// the base language `fr.lproj` and its legacy name `French.lproj`.
    public static func directories(for language: String, into list: inout [String]) {
        var names = [language]
        if let separator = language.firstIndex(where: { $0 == "-" || $0 == "_" }) {
            let base = String(language[..<separator])
            let region = language[language.index(after: separator)...]
            names = [base + "-" + region, base + "_" + region, base]
        }
        if let base = names.last, let legacy = legacyNames[base] { names.append(legacy) }
        for name in names where !name.isEmpty && !list.contains(name + ".lproj") { list.append(name + ".lproj") }
    }
}
