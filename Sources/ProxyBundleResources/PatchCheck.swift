#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// Finds what the layers above the main bundle hold that never takes effect, or that changes
/// more than it seems to, by the lookup rules of `ResourceBundle` over the merged layers: image
/// variants and generic files some devices pass over, localized files a global one or another
/// spelling of the language beats, global files over localized ones, whiteouts that hide nothing
/// or move languages to another localization, loose images the asset catalog serves, source
/// files the app never loads, and names that differ from one below only in letter case (or,
/// when the mount folds case, names of one layer that differ only in case). Each bundle inside
/// the app (`Kit.bundle` at any depth, `Frameworks/X.framework`, `PlugIns/X.appex`) is checked
/// by its own rules: its resources directory, its Info.plist, its languages as its process
/// chooses them (see `ResourceBundle.nested(at:)`).
///
///     let tree = try LayeredTree(paths: ["/srv/hotfix", "/opt/MyApp/Resources"])
///     for finding in PatchCheck(tree: tree).findings() { print(finding.text { "layer \($0)" }) }
public final class PatchCheck {
    public let tree: LayeredTree
    /// The devices whose lookups are checked: those the app is made for unless told
    /// (`Device.checked(madeFor:)`).
    public let devices: [Device]
    /// The main bundle, over the merged layers.
    let bundle: ResourceBundle
    /// The bundles of the app looked at so far, over the merged layers, by path.
    private var bundles: [String: ResourceBundle] = [:]
    /// The layers below the patch being checked, merged, and the main bundle over them.
    var below: (tree: LayeredTree, bundle: ResourceBundle)?
    /// The layers below the patch being checked, merged as a mount that folds case merges
    /// them, when case folds.
    var foldedBelow: FoldedLayers?
    /// The merged listing of each directory looked at, by name, kept: the layer of each name,
    /// and an image's variants, are looked up there rather than each by a walk from the root.
    private var listings: [String: [String: LayeredTree.Listed]] = [:]

    /// Whether names are matched ignoring case (`check --casefold`): a name that differs from
    /// one below only in case then replaces it, and names of one layer that differ only in
    /// case are one entry (see `spellingFindings`).
    public let foldsCase: Bool

    /// `devices` nil: those the main bundle is made for (`ResourceBundle.madeFor`).
    public init(tree: LayeredTree, devices: [Device]? = nil, foldsCase: Bool = false) {
        self.tree = tree
        self.foldsCase = foldsCase
        bundle = ResourceBundle(tree: tree)
        self.devices = devices ?? Device.checked(madeFor: bundle.madeFor)
        bundles[""] = bundle
    }

    /// The findings of every layer but the last (the main bundle), top first, in path order;
    /// first, the asset catalogs this reader does not understand (the main bundle's, then
    /// those of the bundles inside it the layers touch); when case folds, last, the main
    /// bundle's names that differ only in case.
    public func findings() -> [Finding] {
        let main = foldsCase && !tree.layers.isEmpty ? spellingFindings(in: tree.layers.count - 1) : []
        let layers = (0 ..< max(0, tree.layers.count - 1)).flatMap { findings(in: $0) }
        return unreadableCatalogs(in: Array(bundles.values)) + layers + main
    }

    /// The Info.plist files that cannot be read of the bundles looked at by `findings()` (over
    /// the merged layers), in path order: each file's path in the tree, and why.
    public var unreadableInfo: [(path: String, reason: String)] {
        bundles.values.compactMap(\.infoProblem).sorted { ResourcePath.byteOrder($0.path, $1.path) }
    }

    /// The findings of layer `index`, in byte order of their paths.
    public func findings(in index: Int) -> [Finding] {
        below = index + 1 < tree.layers.count ? (try? LayeredTree(layers: Array(tree.layers[(index + 1)...]))).map {
            ($0, ResourceBundle(tree: $0))
        } : nil
        foldedBelow = foldsCase && below != nil ? FoldedLayers(layers: Array(tree.layers[(index + 1)...])) : nil
        var found: [Finding] = []
        walk(index, "", in: CheckedBundle(merged: bundle, below: below?.bundle), into: &found)
        if foldsCase { found += spellingFindings(in: index) }
        return found.enumerated().sorted { a, b in
            a.element.path == b.element.path ? a.offset < b.offset : ResourcePath.byteOrder(a.element.path, b.element.path)
        }.map(\.element)
    }

    /// The bundle at directory `path`, inside `parent`: the same over the merged layers for
    /// every layer checked; over the layers below, when they have it.
    private func nested(at path: String, in parent: CheckedBundle) -> CheckedBundle {
        let merged = bundles[path] ?? parent.merged.nested(at: path)
        bundles[path] = merged
        let below = self.below.flatMap { $0.tree.kind(of: path) == .directory ? parent.below?.nested(at: path) : nil }
        return CheckedBundle(merged: merged, below: below)
    }

    /// Checks directory `path` of layer `index` and those in it, by the rules of `bundle`.
    private func walk(_ index: Int, _ path: String, in bundle: CheckedBundle, into found: inout [Finding]) {
        let layer = tree.layers[index]
        guard let list = try? layer.entries(LayerPath(path)) else { return }
        var images: [String: [String]] = [:]  // base.type: the variants this layer shows
        var names: [String] = []
        for (bytes, entry) in list.entries.map({ (list.name($0), $0) }) {
            guard let name = String(validating: bytes, as: UTF8.self) else { continue }
            let full = ResourcePath.join(path, name)
            if let hidden = hiddenNames(name, bytes: bytes, entry: entry, in: path, layer: layer) {
                if hidden.isEmpty {
                    if !name.hasPrefix(".wh..wh.") || bytes == Whiteout.opaqueMarker {
                        found.append(Finding(kind: .whiteout, layer: index, path: full, bundle: bundle.name))
                    }
                } else if let moved = movedLanguages(by: full, hiding: hidden, in: path, layer: index, bundle: bundle) {
                    found.append(moved)
                }
                continue
            }
            let listed = shown(path)[name]
            if entry.type == UInt8(DT_DIR) {
                guard let listed, listed.kind == .directory,
                      listed.layer == index || tree.layers(at: full).contains(index) else { continue }  // hidden from above
                if listed.layer == index { names.append(name) }
                if let source = sourceOnly(full, layer: index, bundle: bundle) {
                    found.append(source)
                    continue
                }
                if let moved = newLocalization(full, layer: index, bundle: bundle) { found.append(moved) }
                if name.dropFirst().contains("."), !name.hasSuffix(".lproj") {  // a resource that is a directory (.storyboardc)
                    found += deviceTwins(full, layer: index, bundle: bundle)
                }
                // a bundle inside the app has rules of its own
                walk(index, full, in: ResourceBundle.isBundle(named: name) ? nested(at: full, in: bundle) : bundle, into: &found)
                continue
            }
            guard listed?.layer == index else { continue }  // a layer above replaces it
            names.append(name)
            if let source = sourceOnly(full, layer: index, bundle: bundle) {
                found.append(source)
                continue
            }
            let image = ImageName(name)
            if ImageName.types.contains(image.type.lowercased()) && name.contains(".") {
                images[image.base + "." + image.type, default: []].append(full)
            } else {
                found += fileFindings(full, layer: index, bundle: bundle)
            }
        }
        if let below, !foldsCase { found += differentCase(names, in: path, layer: index, below: below.tree, bundle: bundle) }
        for (family, variants) in images.sorted(by: { $0.key < $1.key }) {
            found += imageFindings(ImageName(family), in: path, variants: variants.sorted(), layer: index, bundle: bundle)
        }
    }

    /// For a whiteout entry of this layer, the names it hides below (empty: none); nil when the
    /// entry is no whiteout.
    private func hiddenNames(_ name: String, bytes: [UInt8], entry: EntryList.Entry, in path: String,
                             layer: Layer) -> [String]? {
        let belowNames = foldedBelow?.names(in: path) ?? below?.tree.names(in: path) ?? []
        if bytes == Whiteout.opaqueMarker { return belowNames }
        if name.hasPrefix(".wh..wh.") { return [] }
        if let hidden = Whiteout.hiddenName(bytes).flatMap({ String(validating: $0, as: UTF8.self) }) {
            return shownBelow(hidden, in: path) ? [hidden] : []
        }
        let full = ResourcePath.join(path, name)
        if entry.type == UInt8(DT_CHR), let st = try? layer.attributes(LayerPath(full)), Whiteout.isDevice(st) {
            return shownBelow(name, in: path) ? [name] : []
        }
        return nil
    }

    /// The findings of a non-image file this layer shows at `path`.
    private func fileFindings(_ path: String, layer: Int, bundle: CheckedBundle) -> [Finding] {
        if let beaten = localized(path, layer: layer, bundle: bundle) { return [beaten] }
        return [unreachable(path, layer: layer, bundle: bundle), overridesLocalized(path, layer: layer, bundle: bundle)]
            .compactMap { $0 } + deviceTwins(path, layer: layer, bundle: bundle)
    }

    /// The merged listing of `directory`, by name.
    func shown(_ directory: String) -> [String: LayeredTree.Listed] {
        if let known = listings[directory] { return known }
        var byName: [String: LayeredTree.Listed] = [:]
        for entry in tree.entries(in: directory) { byName[entry.name] = entry }
        listings[directory] = byName
        return byName
    }

    /// Names of this layer in `directory` that differ only in letter case from one the layers
    /// below show there, which still shows.
    private func differentCase(_ names: [String], in directory: String, layer: Int, below: LayeredTree,
                               bundle: CheckedBundle) -> [Finding] {
        var lower: [String: [String]] = [:]
        for name in below.names(in: directory) { lower[name.lowercased(), default: []].append(name) }
        var found: [Finding] = []
        let listing = shown(directory)
        for name in names.sorted() {
            for other in lower[name.lowercased()] ?? [] where other != name {
                let path = ResourcePath.join(directory, other)
                guard let from = listing[other]?.layer, from > layer else { continue }
                found.append(Finding(kind: .letterCase, layer: layer, path: ResourcePath.join(directory, name),
                                     other: path, otherLayer: from, bundle: bundle.name))
            }
        }
        return found
    }
}

/// A bundle of the app as the check of one layer sees it: by its rules over the merged layers,
/// and over the layers below the one checked (nil when they do not have it).
struct CheckedBundle {
    let merged: ResourceBundle
    let below: ResourceBundle?

    /// How findings name it: nil for the main bundle, else its path.
    var name: String? { merged.path.isEmpty ? nil : merged.path }

    /// `path` relative to the bundle's resources directory; nil when it is outside it.
    func resourcePath(_ path: String) -> String? {
        let resources = merged.resources
        if resources.isEmpty { return path }
        return path.hasPrefix(resources + "/") ? String(path.dropFirst(resources.count + 1)) : nil
    }
}
