/// The localizations a bundle's resources are looked up in, most preferred first, and how they
/// were chosen: CoreFoundation's `_CFBundleCopyLanguageSearchListInBundle` (CFBundle_Locale.c).
public struct LanguageSearchList: Equatable, Sendable {
    /// The chosen localizations (`.lproj` names without the extension): the first is searched
    /// right after the global resources, then `Base.lproj`, then the others in order.
    public var languages: [String]
    /// The bundle's localizations they were chosen from (`CFBundleCopyBundleLocalizations`).
    public var localizations: [String]
    /// `CFBundleDevelopmentRegion`, if the bundle's Info.plist has one.
    public var developmentRegion: String?
    /// What the languages were matched against.
    public var matchedAgainst: Preferences

    public enum Preferences: String, Equatable, Sendable {
        /// The user's preferred languages.
        case user
        /// The main bundle's search list: a nested bundle follows the app's choice.
        case mainBundle = "main-bundle"
        /// The development region, `en_US`, or the first localization: nothing else matched.
        case fallback
    }
}

extension ResourceBundle {
    /// The search list of this bundle for a user who prefers `preferred` (most preferred first;
    /// CoreFoundation's own default, with no preferences set, is `en`), inside an app whose main
    /// bundle is `main` (nil: this bundle is the main one).
    ///
    /// `_CFBundleCopyPreferredLanguagesInList`: a bundle other than the main one matches its
    /// localizations against the main bundle's search list, unless the main bundle's Info.plist
    /// sets `CFBundleAllowMixedLocalizations` (or `CFBundleFollowParentLocalization`, or it is an
    /// extension: then the host decides, which is not modelled, and the user's languages are
    /// used); otherwise, or when that matched nothing, against the user's languages; then the
    /// development region alone; then `en_US`. `_CFBundleCopyLanguageSearchListInBundle` tries
    /// again with `en_US`, then the first localization, in the development region's place; then
    /// appends the development region (or, with none, `en`, `English` or `en_US`, the first the
    /// bundle has); an empty list is `en`.
    public func searchList(preferred: [String], main: ResourceBundle?) -> LanguageSearchList {
        let localizations = self.localizations
        let mainLanguages = followed(main).map { main in
            // its own choice (kept by it when it is a main bundle)
            (main.main == nil ? main.searchList(preferred: preferred) : main.searchList(preferred: preferred, main: nil)).languages
        }
        func inList(developmentRegion: String?) -> ([String], LanguageSearchList.Preferences) {
            if let mainLanguages {
                let chosen = LanguageMatch.localizationsToUse(preferred: mainLanguages, available: localizations)
                if !chosen.isEmpty { return (chosen, .mainBundle) }
            }
            let chosen = LanguageMatch.localizationsToUse(preferred: preferred, available: localizations)
            if !chosen.isEmpty { return (chosen, .user) }
            for backstop in [developmentRegion, "en_US"].compactMap({ $0 }) {
                let chosen = LanguageMatch.localizationsToUse(preferred: [backstop], available: localizations)
                if !chosen.isEmpty { return (chosen, .fallback) }
            }
            return ([], .fallback)
        }
        let development = info.developmentRegion
        var (languages, against) = inList(developmentRegion: development)
        for retry in ["en_US", localizations.first].compactMap({ $0 }) where languages.isEmpty {
            (languages, against) = inList(developmentRegion: retry)
        }
        if let development {
            if !languages.contains(development) { languages.append(development) }
        } else if let english = ["en", "English", "en_US"].first(where: localizations.contains), !languages.contains(english) {
            languages.append(english)
        }
        if languages.isEmpty { languages = ["en"] }
        return LanguageSearchList(languages: languages.uniqued(), localizations: localizations, developmentRegion: development,
                                  matchedAgainst: against)
    }

    /// `main`, when this bundle follows its language choice: when it is another bundle than
    /// this one, and its Info.plist (the process's) neither sets `CFBundleAllowMixedLocalizations`
    /// nor `CFBundleFollowParentLocalization`, nor is an extension's
    /// (`_CFBundleCopyPreferredLanguagesInList`).
    func followed(_ main: ResourceBundle?) -> ResourceBundle? {
        guard let main, main.path != path, !main.info.allowsMixedLocalizations, !main.info.followsParent else { return nil }
        return main
    }

    /// The bundle's localizations, as `CFBundleCopyBundleLocalizations` lists them
    /// (`_copyBundleLocalizationsFromResources`): the non-empty strings of `CFBundleLocalizations`,
    /// then every `NAME.lproj` of the resources directory (in byte order here; CoreFoundation
    /// takes the directory's order); with `Base.lproj` there, the development region is added
    /// unless some form of it is listed already. With neither, the development region alone.
    /// A name listed twice (in Info.plist and as a directory) is kept once: CoreFoundation's
    /// list repeats it, to no effect on any answer.
    public var localizations: [String] {
        if let known = knownLocalizations { return known }
        let list = readLocalizations()
        knownLocalizations = list
        return list
    }

    private func readLocalizations() -> [String] {
        var list = info.localizations
        let suffix = ".lproj"
        let directories = tree.names(in: resources).filter { $0.count > suffix.count && $0.hasSuffix(suffix) }
        list += directories.map { String($0.dropLast(suffix.count)) }.sorted(by: ResourcePath.byteOrder)
        guard let development = info.developmentRegion else { return list.uniqued() }
        if list.isEmpty { return [development] }
        if list.contains("Base") && Localizations.found(development, in: list) == nil { list.append(development) }
        return list.uniqued()
    }
}

/// Names of localizations as CoreFoundation compares them.
public enum Localizations {
    /// The legacy names still in use, both ways (`_CFBundleGetAlternateNameForLanguage`).
    static let alternateNames = ["en": "English", "fr": "French", "de": "German", "it": "Italian", "nl": "Dutch",
                                 "es": "Spanish", "ja": "Japanese"]

    /// The form of `language` that `localizations` lists, if any
    /// (`_CFBundleCopyLanguageFoundInLocalizations`): itself, its legacy name (`en`/`English`),
    /// with `-` and `_` swapped after a two-letter code (`en-US`/`en_US`), or a name of the
    /// same canonical form (ICU's `uloc_canonicalize` standing in for CoreFoundation's
    /// `CFLocaleCreateCanonicalLanguageIdentifierFromString`).
    public static func found(_ language: String, in localizations: [String]) -> String? {
        if localizations.contains(language) { return language }
        if let alternate = alternate(of: language), localizations.contains(alternate) { return alternate }
        if let swapped = swappedSeparator(language), localizations.contains(swapped) { return swapped }
        guard let canonical = LanguageMatch.canonical(language) else { return nil }
        return localizations.first { LanguageMatch.canonical($0) == canonical }
    }

    static func alternate(of language: String) -> String? {
        alternateNames[language] ?? alternateNames.first { $0.value == language }?.key
    }

    /// `en-US` for `en_US` and back (`_CFBundleCopyModifiedLocalization`).
    static func swappedSeparator(_ language: String) -> String? {
        var characters = Array(language)
        guard characters.count >= 4, characters[2] == "-" || characters[2] == "_" else { return nil }
        characters[2] = characters[2] == "-" ? "_" : "-"
        return String(characters)
    }

    /// Whether `language` can name a language: letters, then subtags of letters and digits
    /// joined by `-` or `_` (`fr`, `fr-CA`, `zh_Hant_TW`, `English`); nothing that is a path.
    public static func isValid(_ language: String) -> Bool {
        let parts = language.split(separator: "-", omittingEmptySubsequences: false)
            .flatMap { $0.split(separator: "_", omittingEmptySubsequences: false) }
        guard let first = parts.first, (1...16).contains(first.count), first.allSatisfy(\.isASCIILetter) else { return false }
        return parts.dropFirst().allSatisfy { (1...8).contains($0.count) && $0.allSatisfy(\.isASCIILetterOrDigit) }
    }
}

extension Array where Element == String {
    /// Without repeats, each name where it first stood.
    func uniqued() -> [String] {
        var seen = Set<String>()
        return filter { seen.insert($0).inserted }
    }
}

extension Character {
    var isASCIILetter: Bool { isASCII && isLetter }
    var isASCIILetterOrDigit: Bool { isASCII && (isLetter || isNumber) }
}
