import ProxyBundleCore
import ProxyBundleResources
#if canImport(Glibc)
import Glibc
#endif

/// Where `resolve`'s ROOT is: the tree lookups go through (the app's main bundle, when ROOT is a
/// bundle inside an app), the bundle at ROOT, and the proxybundle mount it is on, if any.
struct BundlePlace {
    /// ROOT as the user gave it, for messages.
    let given: String
    /// The main bundle's directory: the mount's root, else the nearest `*.app` above ROOT, else
    /// ROOT itself.
    let top: RawPath
    /// ROOT relative to `top` (empty: ROOT is the main bundle).
    let prefix: String
    let bundle: ResourceBundle
    let mount: RunningMount?

    /// `given`, its names matched ignoring case and normalization with `foldsCase`.
    init(_ given: String, foldsCase: Bool = false) throws {
        self.given = given
        let absolute = Paths.canonical(Paths.absolute(RawPath(argument: given))) ?? Paths.absolute(RawPath(argument: given))
        mount = RunningMount.containing(absolute)
        var top = absolute
        if let mount, mount.mountpoint != absolute {
            top = mount.mountpoint
        } else if mount == nil, let app = BundlePlace.enclosingApp(absolute) {
            top = app
        }
        self.top = top
        let relative = absolute.bytes.dropFirst(top.bytes.count).drop { $0 == UInt8(ascii: "/") }
        prefix = String(decoding: relative, as: UTF8.self)
        let tree: ResourceTree
        do {
            let directory = try DirectoryTree(path: String(decoding: top.bytes, as: UTF8.self))
            tree = foldsCase ? CaseFoldedTree(directory) : directory
        } catch {
            throw Failure("\(given): \(Errno(error.code).description)")
        }
        if !prefix.isEmpty, tree.kind(of: prefix) != .directory {
            throw Failure("\(given): \(Errno(tree.kind(of: prefix) == nil ? ENOENT : ENOTDIR).description)")
        }
        // each bundle on the way decides whose process loads ROOT (an extension's, or the app's)
        bundle = ResourceBundle(tree: tree).bundle(at: prefix)
    }

    /// The nearest directory above `path` whose name ends in `.app`.
    static func enclosingApp(_ path: RawPath) -> RawPath? {
        var current = path.parent
        while current.bytes.count > 1 {
            if current.lastName.count > 4, current.lastName.suffix(4) == Array(".app".utf8) { return current }
            current = current.parent
        }
        return nil
    }

    /// A path of the tree as a whole path (from the directory the tree was opened at).
    func full(_ path: String) -> String {
        let top = String(decoding: top.bytes, as: UTF8.self)
        return top.hasSuffix("/") ? top + path : top + "/" + path
    }

    /// A path of the tree as the user sees it: relative to ROOT.
    func shown(_ path: String) -> String {
        prefix.isEmpty ? path : String(path.dropFirst(prefix.count).drop { $0 == "/" })
    }

    /// `which`'s answer for a path of the tree, on a mount.
    func serving(_ path: String) -> WhichCommand.Answer? {
        guard let mount else { return nil }
        let full = top.appending(path)
        return try? WhichCommand.serving(full, in: mount, shownAs: full)
    }
}

/// What `resolve` found and tried, in words or JSON.
struct Answer {
    let place: BundlePlace
    let query: ResourceQuery
    /// Each bundle searched, with the names it tried.
    let tried: [(bundle: ResourceBundle, candidates: [ResourceBundle.Candidate])]
    let found: String?
    let from: ResourceBundle?

    func text(candidates: Bool) -> String {
        var lines: [String] = []
        if candidates {
            for (bundle, tried) in self.tried {
                lines.append("# " + describe(bundle))
                lines += tried.map { ($0.exists ? "* " : "  ") + place.shown($0.path) }
            }
        }
        if let found {
            let layer = place.serving(found).map { "\t" + String(decoding: WhichCommand.words($0), as: UTF8.self) } ?? ""
            let rendition = rendition.map { "\trendition " + $0.description } ?? ""
            lines.append(place.shown(found) + rendition + layer)
        }
        return lines.joined(separator: "\n")
    }

    /// `bundle: languages fr, Base, en (the user's languages matched fr; development region en)`.
    func describe(_ bundle: ResourceBundle) -> String {
        let list = bundle.searchList(preferred: query.preferred)
        let name = bundle === place.bundle ? "" : place.shown(bundle.path) + ": "
        let against: String
        switch list.matchedAgainst {
        case .user: against = "matched the preferred languages"
        case .mainBundle: against = "follows the main bundle's choice"
        case .fallback: against = "no preferred language matched"
        }
        let region = list.developmentRegion.map { "development region \($0)" } ?? "no development region"
        return name + "languages " + list.languages.joined(separator: ", ") + " (\(against); \(region))"
    }

    /// The catalog's rendition, when the answer is the asset catalog.
    var rendition: AssetCatalog.Rendition? {
        guard let from, let found, found == ResourcePath.join(from.resources, "Assets.car") else { return nil }
        return from.catalogRendition(for: query)
    }

    func json(candidates: Bool) -> String {
        var fields: [(String, String)] = [("path", found.map { JSON.string(place.shown($0)) } ?? "null")]
        if let rendition { fields.append(("rendition", JSON.string(rendition.description))) }
        if let found, let first = place.serving(found)?.places.first {
            fields.append(("role", JSON.string(first.role)))
            fields.append(("backing_path", JSON.string(String(decoding: first.path, as: UTF8.self))))
        }
        if let bundle = from ?? tried.first?.bundle {
            if bundle !== place.bundle { fields.append(("bundle", JSON.string(place.shown(bundle.path)))) }
            fields.append(("search_list", searchList(bundle)))
        }
        if candidates {
            let list = tried.flatMap { $0.candidates }.map(candidate)
            fields.append(("candidates", "[" + list.joined(separator: ",") + "]"))
        }
        return JSON.object(fields)
    }

    func searchList(_ bundle: ResourceBundle) -> String {
        let list = bundle.searchList(preferred: query.preferred)
        return JSON.object([
            ("languages", "[" + list.languages.map(JSON.string).joined(separator: ",") + "]"),
            ("localizations", "[" + list.localizations.map(JSON.string).joined(separator: ",") + "]"),
            ("development_region", list.developmentRegion.map(JSON.string) ?? "null"),
            ("preferred", "[" + query.preferred.map(JSON.string).joined(separator: ",") + "]"),
            ("matched_against", JSON.string(list.matchedAgainst.rawValue)),
        ])
    }

    /// One candidate and why it is not the answer: `loaded`, `shadowed` (by the answer, found
    /// first), `absent`, or, on a mount, `whiteout` / `opaque` with the layer that hides it.
    func candidate(_ candidate: ResourceBundle.Candidate) -> String {
        var fields: [(String, String)] = [("path", JSON.string(place.shown(candidate.path))),
                                          ("exists", candidate.exists ? "true" : "false")]
        if candidate.path == found {
            fields.append(("status", JSON.string("loaded")))
        } else if candidate.exists {
            fields.append(("status", JSON.string("shadowed")))
            fields.append(("by", found.map { JSON.string(place.shown($0)) } ?? "null"))
        } else if let hidden = place.serving(candidate.path), hidden.source == .whiteout || hidden.source == .opaqueDirectory,
                  let layer = hidden.places.first {
            fields.append(("status", JSON.string(hidden.source == .whiteout ? "whiteout" : "opaque")))
            fields.append(("role", JSON.string(layer.role)))
            fields.append(("backing_path", JSON.string(String(decoding: layer.path, as: UTF8.self))))
        } else {
            fields.append(("status", JSON.string("absent")))
        }
        return JSON.object(fields)
    }
}
