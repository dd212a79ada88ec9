#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// Something a patch holds that never takes effect.
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
    }

    public var kind: Kind
    /// The layer holding it (an index of the tree's layers) and its path there.
    public var layer: Int
    public var path: String
    /// What shows or loads instead, and its layer (none for a whiteout).
    public var other: String?
    public var otherLayer: Int?
    /// The devices that load `other` (for an image).
    public var devices: [Device] = []

    /// The finding in words, `role(layer)` naming a layer.
    public func text(_ role: (Int) -> String) -> String {
        let place = "\(path) (\(role(layer)))"
        let from = otherLayer.map(role) ?? "?"
        switch kind {
        case .image:
            let which = Set(devices) == Set(Device.all) ? "every device" : Finding.describe(devices) + " devices"
            return "\(place): on \(which), \(other ?? "?") from \(from) loads instead"
        case .localized:
            return "\(place): never loads, the global \(other ?? "?") from \(from) always comes first"
        case .whiteout:
            return "\(place): a whiteout that hides nothing below it"
        case .letterCase:
            return "\(place): differs only in letter case from \(other ?? "?") from \(from); both show, nothing is replaced"
        }
    }

    /// `scale 3`, `scale 1 phone tall`, `scale 2 pad`... for a set of devices.
    static func describe(_ devices: [Device]) -> String {
        var words: [String] = []
        for scale in 1...3 {
            func talls(_ idiom: Device.Idiom) -> Set<Bool> {
                Set(devices.filter { $0.scale == scale && $0.idiom == idiom }.map(\.tall))
            }
            func suffix(_ talls: Set<Bool>) -> String {
                talls.count == 2 ? "" : talls.contains(true) ? " tall" : " not tall"
            }
            let phone = talls(.phone), pad = talls(.pad)
            if phone == pad {
                if !phone.isEmpty { words.append("scale \(scale)\(suffix(phone))") }
                continue
            }
            if !phone.isEmpty { words.append("scale \(scale) phone\(suffix(phone))") }
            if !pad.isEmpty { words.append("scale \(scale) pad\(suffix(pad))") }
        }
        return words.joined(separator: ", ")
    }
}

/// Finds what the layers above the main bundle hold that never takes effect: image variants
/// some devices pass over for a lower layer's, localized files a global one beats, whiteouts
/// that hide nothing, and names that differ from one below only in letter case.
///
///     let tree = try LayeredTree(paths: ["/srv/hotfix", "/opt/MyApp/Resources"])
///     for finding in PatchCheck(tree: tree).findings() { print(finding.text { "layer \($0)" }) }
public final class PatchCheck {
    public let tree: LayeredTree
    /// The merged listing of each directory looked at, by name, kept: the layer of each name,
    /// and an image's variants, are looked up there rather than each by a walk from the root.
    private var listings: [String: [String: LayeredTree.Listed]] = [:]

    public init(tree: LayeredTree) {
        self.tree = tree
    }

    /// The findings of every layer but the last (the main bundle), top first, in path order.
    public func findings() -> [Finding] {
        (0 ..< max(0, tree.layers.count - 1)).flatMap { findings(in: $0) }
    }

    /// The findings of layer `index`.
    public func findings(in index: Int) -> [Finding] {
        let below = index + 1 < tree.layers.count ? try? LayeredTree(layers: Array(tree.layers[(index + 1)...])) : nil
        var found: [Finding] = []
        walk(index, "", below: below, into: &found)
        return found
    }

    /// Checks directory `path` of layer `index` and those in it.
    private func walk(_ index: Int, _ path: String, below: LayeredTree?, into found: inout [Finding]) {
        let layer = tree.layers[index]
        guard let list = try? layer.entries(LayerPath(path)) else { return }
        var images: [String: [String]] = [:]  // base.type: the variants this layer shows
        var names: [String] = []
        for (bytes, entry) in list.entries.map({ (list.name($0), $0) }) {
            guard let name = String(validating: bytes, as: UTF8.self) else { continue }
            let full = ResourcePath.join(path, name)
            if name.hasPrefix(".wh..wh.") {
                if name == ".wh..wh..opq", below?.names(in: path).isEmpty ?? true {
                    found.append(Finding(kind: .whiteout, layer: index, path: full))
                }
                continue
            }
            if let hidden = Whiteout.hiddenName(bytes).flatMap({ String(validating: $0, as: UTF8.self) }) {
                if !(below?.exists(ResourcePath.join(path, hidden)) ?? false) {
                    found.append(Finding(kind: .whiteout, layer: index, path: full))
                }
                continue
            }
            if entry.type == UInt8(DT_CHR), let st = try? layer.attributes(LayerPath(full)), Whiteout.isDevice(st) {
                if !(below?.exists(full) ?? false) { found.append(Finding(kind: .whiteout, layer: index, path: full)) }
                continue
            }
            if entry.type == UInt8(DT_DIR) {
                guard let listed = shown(path)[name], listed.kind == .directory,
                      listed.layer == index || tree.layers(at: full).contains(index) else { continue }  // hidden from above
                if listed.layer == index { names.append(name) }
                walk(index, full, below: below, into: &found)
                continue
            }
            guard shown(path)[name]?.layer == index else { continue }  // a layer above replaces it
            names.append(name)
            let image = ImageName(name)
            if ImageName.types.contains(image.type.lowercased()) && name.contains(".") {
                images[image.base + "." + image.type, default: []].append(full)
            } else if let finding = localized(full, layer: index) {
                found.append(finding)
            }
        }
        if let below { found += differentCase(names, in: path, layer: index, below: below) }
        for (family, variants) in images.sorted(by: { $0.key < $1.key }) {
            found += passedOver(ImageName(family), in: path, variants: variants.sorted(), layer: index)
        }
    }

    /// The locations an image or a file of directory `path` is looked for in, in order: the
    /// directory itself, after the global one when it is in a `.lproj` directory.
    private func locations(of path: String) -> (global: String, own: String)? {
        let names = ResourcePath.names(path)
        guard let lproj = names.firstIndex(where: { $0.hasSuffix(".lproj") }) else { return nil }
        return ((names[..<lproj] + names[(lproj + 1)...]).joined(separator: "/"), path)
    }

    /// A localized file at `path` that a global file of its name beats.
    private func localized(_ path: String, layer: Int) -> Finding? {
        let (directory, name) = ResourcePath.split(path)
        guard let (global, _) = locations(of: directory) else { return nil }
        let other = ResourcePath.join(global, name)
        guard tree.kind(of: other) == .file else { return nil }
        return Finding(kind: .localized, layer: layer, path: path, other: other, otherLayer: tree.layer(of: other))
    }

    /// For an image family a layer touches (`variants`, its files there), the devices that
    /// load a lower layer's file instead, one finding per such file.
    private func passedOver(_ image: ImageName, in directory: String, variants: [String], layer: Int) -> [Finding] {
        let places = locations(of: directory).map { [$0.global, $0.own] } ?? [directory]
        var loaded: [String: [Device]] = [:]
        var layers: [String: Int] = [:]
        for device in Device.all {
            guard let (path, from) = load(image, for: device, from: places), from > layer else { continue }
            loaded[path, default: []].append(device)
            layers[path] = from
        }
        return loaded.sorted { $0.key < $1.key }.map { path, devices in
            Finding(kind: .image, layer: layer, path: variants.joined(separator: ", "), other: path,
                    otherLayer: layers[path], devices: devices)
        }
    }

    /// The file `device` loads for `image`, and its layer: in the first of `places` with any
    /// of its candidates, the first.
    private func load(_ image: ImageName, for device: Device, from places: [String]) -> (String, Int)? {
        let candidates = image.candidates(for: device)
        for place in places {
            let listing = shown(place)
            for candidate in candidates {
                guard let listed = listing[candidate] else { continue }
                let path = ResourcePath.join(place, candidate)
                if listed.kind == .file || listed.kind == .other && tree.kind(of: path) == .file { return (path, listed.layer) }
            }
        }
        return nil
    }

    /// The merged listing of `directory`, by name.
    private func shown(_ directory: String) -> [String: LayeredTree.Listed] {
        if let known = listings[directory] { return known }
        var byName: [String: LayeredTree.Listed] = [:]
        for entry in tree.entries(in: directory) { byName[entry.name] = entry }
        listings[directory] = byName
        return byName
    }

    /// Names of this layer in `directory` that differ only in letter case from one the layers
    /// below show there, which still shows.
    private func differentCase(_ names: [String], in directory: String, layer: Int, below: LayeredTree) -> [Finding] {
        var lower: [String: [String]] = [:]
        for name in below.names(in: directory) { lower[name.lowercased(), default: []].append(name) }
        var found: [Finding] = []
        let listing = shown(directory)
        for name in names.sorted() {
            for other in lower[name.lowercased()] ?? [] where other != name {
                let path = ResourcePath.join(directory, other)
                guard let from = listing[other]?.layer, from > layer else { continue }
                found.append(Finding(kind: .letterCase, layer: layer, path: ResourcePath.join(directory, name),
                                     other: path, otherLayer: from))
            }
        }
        return found
    }
}
