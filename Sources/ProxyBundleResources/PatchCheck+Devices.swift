/// The findings about devices: image variants and generic files some devices pass over, loose
/// images the asset catalog serves, and source files no device loads.
extension PatchCheck {
    /// The compiled form each source type becomes in an app: the source itself never loads.
    static let compiledForms = ["xib": ".nib", "storyboard": ".storyboardc", "xcassets": "Assets.car",
                                "xcstrings": ".strings in each .lproj"]

    /// A source file or folder (`Main.storyboard`, `Assets.xcassets`) this layer shows at `path`.
    func sourceOnly(_ path: String, layer: Int, bundle: CheckedBundle) -> Finding? {
        guard let dot = path.lastIndex(of: "."), let compiled = PatchCheck.compiledForms[String(path[path.index(after: dot)...])],
              !path[dot...].contains("/") else { return nil }
        return Finding(kind: .sourceOnly, layer: layer, path: path, detail: compiled, bundle: bundle.name)
    }

    /// For a generic entry at `path` (a file, or a directory such as a `.storyboardc`), the
    /// idioms on which a `~ipad`/`~iphone` twin of a layer below replaces it in its own
    /// directory (`_CFBundleReadDirectory`).
    func deviceTwins(_ path: String, layer: Int, bundle: CheckedBundle) -> [Finding] {
        guard bundle.resourcePath(path) != nil else { return [] }
        let (directory, name) = ResourcePath.split(path)
        return Device.Idiom.allCases.compactMap { idiom in
            let concerned = devices.filter { $0.idiom == idiom }
            guard !concerned.isEmpty, let twin = bundle.merged.directory(directory, idiom: idiom).entry(name), twin != name,
                  let from = shown(directory)[twin]?.layer, from > layer else { return nil }
            return Finding(kind: .deviceTwin, layer: layer, path: path, other: ResourcePath.join(directory, twin),
                           otherLayer: from, devices: concerned, bundle: bundle.name)
        }
    }

    /// The findings of an image family this layer touches (`variants`, its files in `directory`).
    func imageFindings(_ image: ImageName, in directory: String, variants: [String], layer: Int,
                       bundle: CheckedBundle) -> [Finding] {
        let catalog = catalogShadows(image, in: directory, variants: variants, layer: layer, bundle: bundle)
        let shadowed = Set(catalog.flatMap(\.devices))
        return catalog + passedOver(image, in: directory, variants: variants, layer: layer, skipping: shadowed, bundle: bundle)
    }

    /// For an image family, the devices that load a lower layer's file instead, one finding per
    /// such file (devices the catalog serves are left out).
    private func passedOver(_ image: ImageName, in directory: String, variants: [String], layer: Int,
                            skipping: Set<Device>, bundle: CheckedBundle) -> [Finding] {
        var places = [directory]
        if let (_, rest) = localizedParts(directory + "/x", in: bundle) {
            places.insert(ResourcePath.join(bundle.merged.resources, ResourcePath.split(rest).directory), at: 0)
        }
        var loaded: [String: [Device]] = [:]
        var layers: [String: Int] = [:]
        for device in devices where !skipping.contains(device) {
            guard let (path, from) = loadedImage(image, for: device, from: places), from > layer else { continue }
            loaded[path, default: []].append(device)
            layers[path] = from
        }
        return loaded.sorted { $0.key < $1.key }.map { path, devices in
            Finding(kind: .image, layer: layer, path: variants.joined(separator: ", "), other: path,
                    otherLayer: layers[path], devices: devices, bundle: bundle.name)
        }
    }

    /// The file `device` loads for `image`, and its layer: in the first of `places` with any
    /// of its candidates, the first.
    private func loadedImage(_ image: ImageName, for device: Device, from places: [String]) -> (String, Int)? {
        let candidates = image.candidates(for: device)
        for place in places {
            let listing = shown(place)
            for candidate in candidates {
                guard let listed = listing[candidate] else { continue }
                return (ResourcePath.join(place, candidate), listed.layer)
            }
        }
        return nil
    }

    /// The devices for which the bundle's asset catalog has a global image family this layer
    /// holds as loose files: `UIImage(named:in:)` finds it there first.
    private func catalogShadows(_ image: ImageName, in directory: String, variants: [String], layer: Int,
                                bundle: CheckedBundle) -> [Finding] {
        guard case .success(let catalog)? = bundle.merged.catalog,
              let relative = bundle.resourcePath(ResourcePath.join(directory, image.base)),
              localizedParts(directory + "/x", in: bundle) == nil else { return [] }
        var renditions: [String] = []
        let concerned = devices.filter { device in
            guard let rendition = catalog.rendition(named: relative, scale: device.scale, idiom: device.idiom) else { return false }
            renditions.append("\(device): \(rendition)")
            return true
        }
        guard !concerned.isEmpty else { return [] }
        let place = ResourcePath.join(bundle.merged.resources, "Assets.car")
        return [Finding(kind: .catalog, layer: layer, path: variants.joined(separator: ", "), other: place,
                        otherLayer: tree.layer(of: place), devices: concerned,
                        detail: relative + "; " + renditions.joined(separator: "; "), bundle: bundle.name)]
    }

    /// The asset catalogs this reader does not understand, of the main bundle and of the
    /// bundles inside it looked at, in path order.
    func unreadableCatalogs(in bundles: [ResourceBundle]) -> [Finding] {
        bundles.sorted { ResourcePath.byteOrder($0.path, $1.path) }.compactMap { bundle in
            guard case .failure(let error)? = bundle.catalog else { return nil }
            let place = ResourcePath.join(bundle.resources, "Assets.car")
            return Finding(kind: .unreadableCatalog, layer: tree.layer(of: place) ?? tree.layers.count - 1, path: place,
                           detail: error.description, bundle: bundle.path.isEmpty ? nil : bundle.path)
        }
    }
}
