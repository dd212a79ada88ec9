/// The findings about localizations: files a global one or another spelling of their language
/// beats, global files added over localized ones, and changes that move languages elsewhere.
extension PatchCheck {
    /// The localization and the rest of a path in a `.lproj` of the resources directory
    /// (`fr.lproj/Main.nib`: `fr`, `Main.nib`); CoreFoundation looks for localized resources there
    /// only.
    func localizedParts(_ path: String) -> (language: String, rest: String)? {
        guard let relative = resourcePath(path) else { return nil }
        let names = ResourcePath.names(relative)
        guard names.count > 1, let first = names.first, first.hasSuffix(".lproj"), first.count > 6 else { return nil }
        return (String(first.dropLast(6)), names.dropFirst().joined(separator: "/"))
    }

    /// The languages a user may prefer that the bundle (or the layers below) localizes for, as
    /// a device names them: `en` for `English`, `pt-BR` for `pt_BR`.
    func checkedLanguages(_ bundle: ResourceBundle) -> [String] {
        bundle.localizations.filter { $0 != "Base" }.map(PatchCheck.code).uniqued()
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
    func localized(_ path: String, layer: Int) -> Finding? {
        guard let (_, rest) = localizedParts(path) else { return nil }
        let global = ResourcePath.join(bundle.resources, rest)
        guard tree.exists(global) else { return nil }
        return Finding(kind: .localized, layer: layer, path: path, other: global, otherLayer: tree.layer(of: global))
    }

    /// A localized file at `path` that no language loads: another localization (a spelling of
    /// its language, `en.lproj` over `English.lproj`, or one searched first) always comes first.
    func unreachable(_ path: String, layer: Int) -> Finding? {
        guard let (language, rest) = localizedParts(path) else { return nil }
        let languages = checkedLanguages(bundle)
        if languages.contains(where: { load(rest, for: $0, in: bundle) == path }) { return nil }
        let own = PatchCheck.code(language)
        guard let winner = load(rest, for: own, in: bundle), winner != path else { return nil }
        return Finding(kind: .unreachableLocalization, layer: layer, path: path, other: winner,
                       otherLayer: tree.layer(of: winner), languages: [own])
    }

    /// A global file this layer adds at `path` over localized copies of it below, which every
    /// language loaded before.
    func overridesLocalized(_ path: String, layer: Int) -> Finding? {
        guard let below, let relative = resourcePath(path), localizedParts(path) == nil, !below.tree.exists(path) else {
            return nil
        }
        let copies = below.bundle.localizations.filter { localization in
            below.tree.exists(ResourcePath.join(bundle.resources, localization + ".lproj/" + relative))
        }
        guard !copies.isEmpty else { return nil }
        return Finding(kind: .overridesLocalized, layer: layer, path: path, languages: copies.map(PatchCheck.code),
                       detail: copies.map { $0 + ".lproj/" + relative }.joined(separator: ", "))
    }

    /// A whiteout at `path` that hides `hidden` (names in `directory`) and so moves languages to
    /// another localization's files, or from a global file to localized ones; nil when no
    /// language's answer moves (a name deleted outright is what a whiteout is for).
    func movedLanguages(by path: String, hiding hidden: [String], in directory: String, layer: Int) -> Finding? {
        guard let below, let relative = resourcePath(directory) ?? (directory == bundle.resources ? "" : nil) else { return nil }
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
        return moves(of: names, layer: layer, path: path, excluding: nil)
    }

    /// A `.lproj` directory this layer adds at `path`, which the layers below lack: languages
    /// that now match it, or its parent, may move to other files than the patch's own
    /// (`fr_CA.lproj` puts `Base.lproj` before `fr.lproj` for fr-CA).
    func newLocalization(_ path: String, layer: Int) -> Finding? {
        guard let below, let relative = resourcePath(path), ResourcePath.names(relative).count == 1,
              relative.hasSuffix(".lproj"), !below.tree.exists(path) else { return nil }
        var names: [String] = []
        for localization in bundle.localizations {
            names += tree.names(in: ResourcePath.join(bundle.resources, localization + ".lproj"))
        }
        return moves(of: names.uniqued(), layer: layer, path: path, excluding: path + "/")
    }

    /// The finding for `names` (relative to the resources directory, without a `.lproj`) whose
    /// answer changed for some language between the layers below and the merged ones, leaving
    /// out answers now under `excluding` (the patch's own new files).
    private func moves(of names: [String], layer: Int, path: String, excluding: String?) -> Finding? {
        guard let below, !names.isEmpty else { return nil }
        var lines: [String] = []
        var languages: [String] = []
        for language in (checkedLanguages(below.bundle) + checkedLanguages(bundle)).uniqued() {
            if excluding != nil,
               below.bundle.searchList(preferred: [language]).languages == bundle.searchList(preferred: [language]).languages {
                continue  // a new localization moves only the languages whose search list it changes
            }
            var moved: [String] = []
            for name in names {
                // a name now found elsewhere, in or from a localization (one found nowhere was deleted)
                guard let before = load(name, for: language, in: below.bundle), let after = load(name, for: language, in: bundle),
                      before != after, localizedParts(before) != nil || localizedParts(after) != nil else { continue }
                if let excluding, after.hasPrefix(excluding) { continue }
                moved.append("\(shownPath(before)) to \(shownPath(after))")
            }
            guard !moved.isEmpty else { continue }
            languages.append(language)
            let more = moved.count > 3 ? " (and \(moved.count - 3) more)" : ""
            lines.append("\(language): " + moved.prefix(3).joined(separator: ", ") + more)
        }
        guard !lines.isEmpty else { return nil }
        return Finding(kind: .movesLanguage, layer: layer, path: path, languages: languages,
                       detail: lines.joined(separator: "; "))
    }

    /// A tree path relative to the resources directory, as findings name resources.
    func shownPath(_ path: String) -> String {
        resourcePath(path) ?? path
    }
}
