/// A bundle in a tree, and CoreFoundation's rules for finding its resources
/// (swift-corelibs-foundation's `CFBundle_Resources.c` and `CFBundle_Locale.c`, with Apple's ICU
/// choosing languages), plus UIImage's image variants:
///
///     let tree = try DirectoryTree(path: "/mnt/myapp")          // or a LayeredTree
///     let bundle = ResourceBundle(tree: tree)
///     let query = ResourceQuery(name: "Images/icon", type: "png", scale: 3)
///     bundle.resolve(query)                                      // "Images/icon@3x.png"
public final class ResourceBundle {
    public let tree: ResourceTree
    /// Where the bundle is in the tree (`""`: the tree is the bundle).
    public let path: String
    /// Its resources directory, with any symlink on the way resolved (see `init`).
    public let resources: String
    /// Whether its resources are in `Contents/Resources`: a macOS bundle.
    public let isMacOS: Bool
    /// What its Info.plist says.
    public let info: BundleInfo
    /// Its Info.plist when it has one that cannot be read (the file's path in the tree, and
    /// why): `info` is then a bundle's without one, as CoreFoundation takes it; `resolve` and
    /// `check` say it once on stderr.
    public let infoProblem: (path: String, reason: String)?
    /// The main bundle of the process that loads this one, when this is another bundle inside
    /// it: the app for a resource bundle or a framework, the extension for what an extension
    /// holds. Its language choice is followed (see `searchList(preferred:main:)`), and it says
    /// which device the bundle runs on (`madeFor`).
    public let main: ResourceBundle?
    private var searchLists: [[String]: LanguageSearchList] = [:]
    /// `localizations`, once read (`check` asks for them per file).
    var knownLocalizations: [String]? = nil
    private var catalogRead = false
    private var catalogResult: Result<AssetCatalog, AssetCatalog.Unreadable>? = nil
    private var directories: [DirectoryKey: ResourceDirectory] = [:]

    /// The bundle at `path` of `tree`, inside the app whose main bundle is `main` (nil: it is
    /// the main bundle). Its layout as `_CFBundleGetBundleVersionForURL` tells it: with a
    /// `Contents` directory, `Contents/Resources` (macOS), else with a `Resources` directory,
    /// that (OPENSTEP, GNUstep), else the bundle itself (iOS); for a `.framework`, `Resources`
    /// comes before `Contents` (a macOS framework's `Resources` is a symlink to
    /// `Versions/Current/Resources`: the tree's own path of it is kept, so that the check of a
    /// layer, which walks real directories, finds it).
    public init(tree: ResourceTree, path: String = "", main: ResourceBundle? = nil) {
        self.tree = tree
        self.path = path
        self.main = main
        let contents = ResourcePath.join(path, "Contents")
        let openStep = ResourcePath.join(path, "Resources")
        let hasContents = tree.kind(of: contents) == .directory
        let hasResources = tree.kind(of: openStep) == .directory
        let infoFiles: [String]
        if hasContents && !(hasResources && path.hasSuffix(".framework")) {
            resources = tree.realPath(ResourcePath.join(contents, "Resources"))
            isMacOS = true
            infoFiles = [ResourcePath.join(contents, "Info.plist")]
        } else if hasResources {
            resources = tree.realPath(openStep)
            isMacOS = false
            infoFiles = [ResourcePath.join(openStep, "Info-gnustep.plist"), ResourcePath.join(openStep, "Info.plist"),
                         ResourcePath.join(path, "Info.plist")]
        } else {
            resources = path
            isMacOS = false
            infoFiles = [ResourcePath.join(path, "Info.plist")]
        }
        let infoFile = infoFiles.first { tree.kind(of: $0) == .file }
        let (info, problem) = infoFile.map { ResourceBundle.readInfo(tree, $0) } ?? (BundleInfo(), nil)
        self.info = info
        infoProblem = problem.map { (infoFile ?? "", $0) }
    }

    /// The Info.plist at `path` of `tree` (a file), and why it could not be read, if so (1 MiB
    /// at most: an Info.plist is a few kilobytes).
    static func readInfo(_ tree: ResourceTree, _ path: String) -> (BundleInfo, String?) {
        let limit = 1 << 20
        guard let bytes = tree.contents(of: path, limit: limit + 1) else { return (BundleInfo(), "cannot be read") }
        guard bytes.count <= limit else { return (BundleInfo(), "is over 1 MiB, more than an Info.plist holds") }
        do {
            return (BundleInfo(info: try PropertyList.read(bytes)), nil)
        } catch {
            return (BundleInfo(), error.description)
        }
    }

    /// The compiled asset catalog of the resources directory (`Assets.car`), read once: nil
    /// when there is none, a failure when this reader does not understand it.
    public var catalog: Result<AssetCatalog, AssetCatalog.Unreadable>? {
        if !catalogRead {
            catalogRead = true
            let path = ResourcePath.join(resources, "Assets.car")
            if tree.kind(of: path) == .file, let bytes = tree.contents(of: path, limit: 512 << 20) {
                catalogResult = Result { () throws(AssetCatalog.Unreadable) in try AssetCatalog(bytes: bytes) }
            }
        }
        return catalogResult
    }

    /// The catalog's rendition of the image `query` asks for, when the catalog serves it:
    /// `UIImage(named:)` looks there before any loose file. A name that names a variant
    /// (`icon@2x`) or a type other than an image's is not looked for there.
    public func catalogRendition(for query: ResourceQuery) -> AssetCatalog.Rendition? {
        guard let device = query.device(idiom: idiom(for: query.idiom)), case .success(let catalog)? = catalog else {
            return nil
        }
        let (subdirectory, fileName) = query.place
        let image = ImageName(fileName)
        guard !image.hasVariant, ImageName.types.contains(image.type.lowercased()) else { return nil }
        return catalog.rendition(named: ResourcePath.join(subdirectory, image.base), scale: device.scale, idiom: device.idiom)
    }

    /// The search list for `preferred` languages (computed once per list).
    public func searchList(preferred: [String]) -> LanguageSearchList {
        if let known = searchLists[preferred] { return known }
        let list = searchList(preferred: preferred, main: main)
        searchLists[preferred] = list
        return list
    }

    /// The directories searched, in order (`_createQueryTableAtPath`), each with `subdirectory`
    /// below it: the resources directory (global resources win), the first language's `.lproj`,
    /// `Base.lproj`, then the other languages' `.lproj`.
    public func locations(subdirectory: String, languages: [String]) -> [String] {
        locationGroups(subdirectory: subdirectory, languages: languages).map(\.path)
    }

    /// The locations, each marked when it is one of the other languages' (after `Base.lproj`).
    private func locationGroups(subdirectory: String, languages: [String]) -> [(path: String, later: Bool)] {
        var groups = [(path: resources, later: false)]
        var seen = Set<String>()
        let lproj = languages.prefix(1).map { ($0, false) } + [("Base", false)] + languages.dropFirst().map { ($0, true) }
        for (language, later) in lproj where seen.insert(language).inserted {  // a directory read again adds nothing
            groups.append((ResourcePath.join(resources, language + ".lproj"), later))
        }
        return groups.map { (ResourcePath.join($0.path, subdirectory), $0.later) }
    }

    /// One name tried in one location: its path in the tree (the entry a device's variant put in
    /// its place, if any), and whether it is there.
    public struct Candidate: Equatable, Sendable {
        public var path: String
        public var exists: Bool

        public init(path: String, exists: Bool) {
            self.path = path
            self.exists = exists
        }
    }

    /// Every name `query` tries, in order: for an image, the asset catalog first; then the
    /// locations outside, the names inside.
    public func candidates(for query: ResourceQuery) -> [Candidate] {
        let (subdirectory, _) = query.place
        let idiom = idiom(for: query.idiom)
        let names = query.fileNames(idiom: idiom)
        var first: [Candidate] = []
        if query.scale != nil, catalog != nil {
            first = [Candidate(path: ResourcePath.join(resources, "Assets.car"), exists: catalogRendition(for: query) != nil)]
        }
        return first + locations(subdirectory: subdirectory, languages: searchList(preferred: query.preferred).languages)
            .flatMap { location in
                let directory = self.directory(location, idiom: idiom)
                return names.map { name in
                    let found = directory.entry(name)
                    let path = ResourcePath.join(location, found ?? name)
                    return Candidate(path: found == nil ? path : tree.spelling(of: path), exists: found != nil)
                }
            }
    }

    /// The path (in the tree) of what `query` loads: in the first location that has any of the
    /// names, the first of them. Nil when no location has one, or the query climbs out of the
    /// resources directory.
    public func resolve(_ query: ResourceQuery) -> String? {
        guard query.staysInside else { return nil }
        return candidates(for: query).first(where: \.exists)?.path
    }

    /// Every resource of `type` in search order (`paths(forResourcesOfType:inDirectory:)`,
    /// `_CFBundleAddValueForType`): all of the global ones, those of the first language and of
    /// `Base.lproj`, and those of the other languages only when neither of those two has any.
    public func resources(ofType type: String, subdirectory: String = "", preferred: [String],
                          idiom: IdiomChoice = .bundle) -> [String] {
        let idiom = self.idiom(for: idiom)
        let subdirectory = ResourcePath.names(subdirectory).joined(separator: "/")
        guard !ResourcePath.names(subdirectory).contains("..") else { return [] }
        let languages = searchList(preferred: preferred).languages
        var found: [String] = []
        var localized = false
        for (index, (location, later)) in locationGroups(subdirectory: subdirectory, languages: languages).enumerated() {
            if later && localized { break }
            let names = directory(location, idiom: idiom).names(ofType: type)
            if index > 0 && !later && !names.isEmpty { localized = true }
            found += names.map { ResourcePath.join(location, $0) }
        }
        return found
    }

    /// The `*.bundle` directories right in the resources directory, in byte order of their
    /// names: where `imageNamed:` across resource bundles (CocoaPods') looks next. Each follows
    /// this bundle's (or its main bundle's) language choice.
    public var nestedBundles: [ResourceBundle] {
        tree.names(in: resources)
            .filter { $0.hasSuffix(".bundle") && tree.kind(of: ResourcePath.join(resources, $0)) == .directory }
            .sorted(by: ResourcePath.byteOrder)
            .map { nested(at: ResourcePath.join(resources, $0)) }
    }

    /// This bundle and, with `nested`, its resource bundles after it: the order `resolve(_:nested:)`
    /// searches them.
    public func searched(nested: Bool) -> [ResourceBundle] {
        nested ? [self] + nestedBundles : [self]
    }

    /// What `query` loads from this bundle or, with `nested`, from the first of its resource
    /// bundles that has it.
    public func resolve(_ query: ResourceQuery, nested: Bool) -> String? {
        for bundle in searched(nested: nested) {
            if let path = bundle.resolve(query) { return path }
        }
        return nil
    }

    /// The resources of directory `path` for a device of `idiom` (read once for every idiom).
    func directory(_ path: String, idiom: Device.Idiom?) -> ResourceDirectory {
        let key = DirectoryKey(path: path, idiom: idiom)
        if let known = directories[key] { return known }
        let idioms: [Device.Idiom?] = [nil] + Device.Idiom.allCases
        let known = idioms.lazy.compactMap { self.directories[DirectoryKey(path: path, idiom: $0)] }.first
        let names = known?.names ?? tree.names(in: path)
        let directory = ResourceDirectory(names: names, idiom: idiom, foldsCase: tree.foldsCase)
        directories[key] = directory
        return directory
    }

    private struct DirectoryKey: Hashable {
        var path: String
        var idiom: Device.Idiom?
    }
}
