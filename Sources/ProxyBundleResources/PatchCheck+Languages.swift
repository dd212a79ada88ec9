/// The findings about localizations: files a global one or another spelling of their language
/// beats, global files added over localized ones, and changes that move languages elsewhere.
/// Each by the rules of the bundle that holds the file.
extension PatchCheck {
    /// The localization and the rest of a path in a `.lproj` of the bundle's resources
    /// directory (`fr.lproj/Main.nib`: `fr`, `Main.nib`); CoreFoundation looks for localized
    /// resources there only.
    func localizedParts(_ path: String, in bundle: CheckedBundle) -> (language: String, rest: String)? {
        guard let relative = bundle.resourcePath(path) else { return nil }
        let names = ResourcePath.names(relative)
        guard names.count > 1, let first = names.first, first.hasSuffix(".lproj"), first.count > 6 else { return nil }
        return (String(first.dropLast(6)), names.dropFirst().joined(separator: "/"))
    }

    /// The languages a user may prefer that give `bundle` a search list of their own, as a
    /// device names them (`en` for `English`, `pt-BR` for `pt_BR`): its localizations, and
    /// when it follows the choice of its process's main bundle, that bundle's first.
    func checkedLanguages(_ bundle: ResourceBundle) -> [String] {
        let localizations = (bundle.followed(bundle.main)?.localizations ?? []) + bundle.localizations
        return localizations.filter { $0 != "Base" }.map(PatchCheck.code).uniqued()
    }

    static func code(_ localization: String) -> String {
        Localizations.alternate(of: localization).flatMap { $0.count < localization.count ? $0 : nil }
            ?? String(localization.map { $0 == "_" ? "-" : $0 })
    }

    /// What `language` loads for the resource `rest` (relative to the resources directory),
    /// whatever the device.
    func load(_ rest: String, for language: String, in bundle: ResourceBundle) -> String? {
        bundle.resolve(ResourceQuery(name: rest, languages: [language], idiom: .none))
    }

    /// A localized file at `path` that a global entry of its name beats for every language.
    func localized(_ path: String, layer: Int, bundle: CheckedBundle) -> Finding? {
        guard let (_, rest) = localizedParts(path, in: bundle) else { return nil }
        let global = ResourcePath.join(bundle.merged.resources, rest)
        guard tree.exists(global) else { return nil }
        return Finding(kind: .localized, layer: layer, path: path, other: global, otherLayer: tree.layer(of: global),
                       bundle: bundle.name)
    }

    /// A localized file at `path` that no language loads: another localization (a spelling of
    /// its language, `en.lproj` over `English.lproj`, or one searched first) always comes first.
    func unreachable(_ path: String, layer: Int, bundle: CheckedBundle) -> Finding? {
        guard let (language, rest) = localizedParts(path, in: bundle) else { return nil }
        let merged = bundle.merged
        if checkedLanguages(merged).contains(where: { load(rest, for: $0, in: merged) == path }) { return nil }
        let own = PatchCheck.code(language)
        guard let winner = load(rest, for: own, in: merged), winner != path else { return nil }
        return Finding(kind: .unreachableLocalization, layer: layer, path: path, other: winner,
                       otherLayer: tree.layer(of: winner), languages: [own], bundle: bundle.name)
    }

    /// A global file this layer adds at `path` over localized copies of it below, which every
    /// language loaded before.
    func overridesLocalized(_ path: String, layer: Int, bundle: CheckedBundle) -> Finding? {
        guard let below, let before = bundle.below, let relative = bundle.resourcePath(path),
              localizedParts(path, in: bundle) == nil, !below.tree.exists(path) else {
            return nil
        }
        let copies = before.localizations.filter { localization in
            below.tree.exists(ResourcePath.join(bundle.merged.resources, localization + ".lproj/" + relative))
        }
        guard !copies.isEmpty else { return nil }
        return Finding(kind: .overridesLocalized, layer: layer, path: path, languages: copies.map(PatchCheck.code),
                       detail: copies.map { $0 + ".lproj/" + relative }.joined(separator: ", "), bundle: bundle.name)
    }

    /// A whiteout at `path` that hides `hidden` (names in `directory`) and so moves languages to
    /// another localization's files, or from a global file to localized ones; nil when no
    /// language's answer moves (a name deleted outright is what a whiteout is for).
    func movedLanguages(by path: String, hiding hidden: [String], in directory: String, layer: Int,
                        bundle: CheckedBundle) -> Finding? {
        guard let below, let relative = bundle.resourcePath(directory) ?? (directory == bundle.merged.resources ? "" : nil) else {
            return nil
        }
        var names = hidden.map { ResourcePath.join(relative, $0) }
        if relative.isEmpty {
            // a whole localization removed: every name it held may now come from elsewhere
            for lproj in hidden where lproj.hasSuffix(".lproj") {
                names += below.tree.names(in: ResourcePath.join(directory, lproj))
                names.removeAll { $0 == lproj }
            }
        } else if relative.hasSuffix(".lproj") || relative.contains(".lproj/") {
            names = names.map { ResourcePath.names($0).dropFirst().joined(separator: "/") }
        }
        return moves(of: names, layer: layer, path: path, excluding: nil, bundle: bundle)
    }

    /// A `.lproj` directory this layer adds at `path`, which the layers below lack: languages
    /// that now match it, or its parent, may move to other files than the patch's own
    /// (`fr_CA.lproj` puts `Base.lproj` before `fr.lproj` for fr-CA).
    func newLocalization(_ path: String, layer: Int, bundle: CheckedBundle) -> Finding? {
        guard let below, let relative = bundle.resourcePath(path), ResourcePath.names(relative).count == 1,
              relative.hasSuffix(".lproj"), !below.tree.exists(path) else { return nil }
        var names: [String] = []
        for localization in bundle.merged.localizations {
            names += tree.names(in: ResourcePath.join(bundle.merged.resources, localization + ".lproj"))
        }
        return moves(of: names.uniqued(), layer: layer, path: path, excluding: path + "/", bundle: bundle)
    }

    /// The finding for `names` (relative to the resources directory, without a `.lproj`) whose
    /// answer changed for some language between the layers below and the merged ones, leaving
    /// out answers now under `excluding` (the patch's own new files).
    private func moves(of names: [String], layer: Int, path: String, excluding: String?, bundle: CheckedBundle) -> Finding? {
        guard let before = bundle.below, !names.isEmpty else { return nil }
        let after = bundle.merged
        var lines: [String] = []
        var languages: [String] = []
        for language in (checkedLanguages(before) + checkedLanguages(after)).uniqued() {
            if excluding != nil, before.searchList(preferred: [language]).languages == after.searchList(preferred: [language]).languages {
                continue  // a new localization moves only the languages whose search list it changes
            }
            var moved: [String] = []
            for name in names {
                // a name now found elsewhere, in or from a localization (one found nowhere was deleted)
                guard let from = load(name, for: language, in: before), let to = load(name, for: language, in: after),
                      from != to, localizedParts(from, in: bundle) != nil || localizedParts(to, in: bundle) != nil else { continue }
                if let excluding, to.hasPrefix(excluding) { continue }
                moved.append("\(shownPath(from, in: bundle)) to \(shownPath(to, in: bundle))")
            }
            guard !moved.isEmpty else { continue }
            languages.append(language)
            let more = moved.count > 3 ? " (and \(moved.count - 3) more)" : ""
            lines.append("\(language): " + moved.prefix(3).joined(separator: ", ") + more)
        }
        guard !lines.isEmpty else { return nil }
        return Finding(kind: .movesLanguage, layer: layer, path: path, languages: languages,
                       detail: lines.joined(separator: "; "), bundle: bundle.name)
    }

    /// A tree path relative to the bundle's resources directory, as findings name resources.
    func shownPath(_ path: String, in bundle: CheckedBundle) -> String {
        bundle.resourcePath(path) ?? path
    }
}
