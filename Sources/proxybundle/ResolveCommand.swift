import ArgumentParser
import ProxyBundleCore
import ProxyBundleResources
#if canImport(Glibc)
import Glibc
#endif

struct ResolveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Tell which file an app would load for a resource name (CoreFoundation's and UIImage's rules).",
        discussion: """
            Prints the path of the resource relative to ROOT; on a proxybundle mount, a tab and \
            the layer that serves it, as `which` says it. Nothing found: a line on stderr, exit 1. \
            With --type and no NAME, every resource of that type, one a line, in search order.
            Languages are chosen as CoreFoundation chooses them (Apple's ICU matcher): the first \
            preferred language that matches one of the bundle's localizations, or a parent or \
            likely form of it, then the development region. Looked for in the resources \
            directory (Contents/Resources, else Resources, else the bundle itself), then the \
            chosen localization's .lproj, Base.lproj, then the rest of the search list; the \
            first directory that has the name wins. On a phone (pad), NAME~iphone (~ipad) \
            replaces NAME in its own directory: the device is the one the app is made for \
            (Info.plist's UIDeviceFamily, or LSRequiresIPhoneOS: a phone; a macOS bundle, \
            Contents/: none), a phone with a note on stderr for an app made for both, none when \
            nothing says; --idiom chooses. A bundle inside an app (ROOT/Some.bundle, \
            Frameworks/X.framework) follows the app's language choice unless the app sets \
            CFBundleAllowMixedLocalizations; an extension (PlugIns/X.appex) chooses its own. \
            An image tries each scale from the device's down, then up, the idiom's variant \
            first. See README "Resources: which file an app loads".
            Examples:
              proxybundle resolve /mnt/myapp Localizable.strings --languages fr-CA,en
              proxybundle resolve /mnt/myapp Images/icon --image --scale 3
              proxybundle resolve /mnt/myapp --type strings --languages de
            """
    )

    @Argument(help: "A proxybundle mount, any directory laid out as a bundle, or a bundle inside one.")
    var root: String

    @Argument(help: "The resource's name; a / in it names a subdirectory (Images/icon.png).")
    var name: String?

    @Option(name: .customLong("type"), help: "The type (extension) added to the name, with or without its dot.")
    var type: String?

    @Option(name: .customLong("in-directory"), help: "A subdirectory of the resources directory.")
    var subdirectory: String?

    @Option(help: "Preferred languages, most preferred first, separated by commas (fr-CA,en); default en.")
    var languages: String?

    @Flag(help: "Look the name up as an image, by UIImage's variant rules.")
    var image = false

    @Option(help: "The device's scale for --image: 1, 2 or 3.", completion: .list(["1", "2", "3"]))
    var scale: Int?

    @Option(help: "The device's idiom, phone or pad: its ~iphone or ~ipad variants replace the plain name; none: no variant does. Default: the device the app is made for.",
            completion: .list(["phone", "pad", "none"]))
    var idiom: String?

    @Flag(help: "A 4-inch phone for --image: -568h variants first (a phone, whatever the app is made for).")
    var tall = false

    @Flag(name: .customLong("all-bundles"), help: "Search the *.bundle directories of the resources directory too.")
    var allBundles = false

    @Flag(help: "Match names ignoring letter case and Unicode normalization, as ext4's casefold does (for a bundle made on macOS or Windows).")
    var casefold = false

    @Flag(help: "Print the search list and every candidate in the order tried, those that exist marked with *.")
    var candidates = false

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        if let scale, !(1...3).contains(scale) { throw ValidationError("--scale must be 1, 2 or 3, not \(scale)") }
        if let idiom, IdiomChoice(word: idiom) == nil { throw ValidationError("--idiom must be phone, pad or none, not '\(idiom)'") }
        if !image && (scale != nil || tall) { throw ValidationError("--scale and --tall need --image") }
        if tall, let idiom, idiom != Device.Idiom.phone.rawValue {
            throw ValidationError("--tall is a 4-inch phone: it goes with --idiom phone, not \(idiom)")
        }
        if name == nil && (type ?? "").isEmpty { throw ValidationError("give a NAME, or --type to list every resource of a type") }
        if name == nil && image { throw ValidationError("--image needs a NAME") }
        for (what, text) in [("name", name ?? "x"), ("--in-directory", subdirectory ?? "")] {
            if text.hasPrefix("/") { throw ValidationError("the \(what) '\(text)' must be relative to the bundle") }
            if ResourcePath.names(text).contains("..") { throw ValidationError("the \(what) '\(text)' may not contain ..") }
        }
        if let name, ResourcePath.names(name).isEmpty { throw ValidationError("the name must not be empty") }
        if let type, type.contains("/") { throw ValidationError("the type '\(type)' may not contain /") }
        for language in preferred where !Localizations.isValid(language) {
            throw ValidationError("'\(language)' is not a language (fr, fr-CA, zh-Hant, English)")
        }
    }

    /// The languages given, in order.
    var preferred: [String] {
        (languages ?? "").split(separator: ",").map { String($0).trimmedOfSpaces }.filter { !$0.isEmpty }
    }

    var query: ResourceQuery {
        // a 4-inch phone is a phone
        let idiom = self.idiom.flatMap(IdiomChoice.init(word:)) ?? (tall ? .phone : .bundle)
        return ResourceQuery(name: name ?? "", type: type, subdirectory: subdirectory ?? "", languages: preferred,
                             scale: image ? scale ?? 1 : nil, tall: tall, idiom: idiom)
    }

    /// Says on stderr, once each, the Info.plist files that cannot be read of the bundles the
    /// answer depends on (ROOT's, the main bundles it is loaded by, those searched): each such
    /// bundle is taken as one without an Info.plist, as CoreFoundation takes it.
    func sayUnreadableInfo(_ place: BundlePlace) {
        var bundles: [ResourceBundle] = []
        var next: ResourceBundle? = place.bundle
        while let bundle = next { bundles.append(bundle); next = bundle.main }
        bundles += place.bundle.searched(nested: allBundles)
        var said: Set<String> = []
        for case let (path, reason)? in bundles.map(\.infoProblem) where said.insert(path).inserted {
            Failure("\(place.full(path)): \(reason); read as a bundle without an Info.plist").report()
        }
    }

    /// Says on stderr which device is assumed, when the app is made for more than one and
    /// --idiom does not choose.
    func noteAssumedIdiom(_ place: BundlePlace) {
        let bundle = place.bundle
        guard query.idiom == .bundle, bundle.assumesIdiom, let madeFor = bundle.madeFor, let assumed = bundle.idiom(for: .bundle) else {
            return
        }
        let others = (madeFor.filter { $0 != assumed }.map(\.rawValue) + ["none"]).joined(separator: " or --idiom ")
        Failure("note: \(place.given) is made for \(madeFor.map(\.rawValue).joined(separator: " and ")); "
                + "assuming \(assumed.rawValue) (--idiom \(others) to choose)").report()
    }

    func run() throws {
        // the resource rules work on text: a ROOT whose path is not UTF-8 is refused by name
        guard let root = RawPath(argument: root).text else {
            throw Failure("\(RawPath(argument: root)): resolve takes a ROOT whose path is UTF-8")
        }
        // inside a mount that folds names, they fold here too
        let folds = casefold || RunningMount.containing(Paths.absolute(RawPath(root))).map(\.foldsNames) == true
        let place = try BundlePlace(root, foldsCase: folds)
        sayUnreadableInfo(place)
        noteAssumedIdiom(place)
        if name == nil {
            return list(place)
        }
        var tried: [(bundle: ResourceBundle, candidates: [ResourceBundle.Candidate])] = []
        var found: (bundle: ResourceBundle, path: String)? = nil
        for bundle in place.bundle.searched(nested: allBundles) where found == nil {
            if image, case .failure(let error)? = bundle.catalog {
                Failure("\(place.shown(ResourcePath.join(bundle.resources, "Assets.car"))): \(error); loose files only").report()
            }
            tried.append((bundle, bundle.candidates(for: query)))
            found = bundle.resolve(query).map { (bundle, $0) }
        }
        let answer = Answer(place: place, query: query, tried: tried, found: found?.path, from: found?.bundle)
        let output = json ? answer.json(candidates: candidates) : answer.text(candidates: candidates)
        if !output.isEmpty { print(output) }
        guard found != nil else { throw Failure("\(name ?? ""): no resource of that name in \(root)") }
    }

    /// Every resource of --type, in search order, each bundle's after the other.
    func list(_ place: BundlePlace) {
        let paths = place.bundle.searched(nested: allBundles).flatMap { bundle in
            bundle.resources(ofType: type ?? "", subdirectory: subdirectory ?? "", preferred: query.preferred,
                             idiom: query.idiom)
        }
        let shown = paths.map(place.shown)
        if json {
            print("[" + shown.map(JSON.string).joined(separator: ",") + "]")
        } else {
            for path in shown { print(path) }
        }
    }
}

extension String {
    /// Without the spaces at either end.
    var trimmedOfSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
