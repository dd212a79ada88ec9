import ArgumentParser
import ProxyBundleCore
import ProxyBundleResources
#if canImport(Glibc)
import Glibc
#endif

struct ResolveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Tell which file an app would load for a resource name (NSBundle and UIImage rules).",
        discussion: """
            Prints the path of the resource relative to ROOT; on a proxybundle mount, a tab and \
            the layer that serves it, as `which` says it. Nothing found: a line on stderr, exit 1.
            Looked for in the resources directory (Contents/Resources, else Resources, else the \
            bundle itself), then each language's .lproj (fr-CA, fr_CA, fr, French), Base.lproj, \
            and the development region of Info.plist. An image tries each scale from the \
            device's down, then up, the idiom's variant first; the first directory with any \
            variant wins. See README "Resources: which file an app loads".
            Examples:
              proxybundle resolve /mnt/myapp Localizable.strings --languages fr-CA,en
              proxybundle resolve /mnt/myapp Images/icon --image --scale 3
            """
    )

    @Argument(help: "A proxybundle mount, or any directory laid out as a bundle.")
    var root: String

    @Argument(help: "The resource's name; a / in it names a subdirectory (Images/icon.png).")
    var name: String

    @Option(name: .customLong("type"), help: "The extension added to the name.")
    var type: String?

    @Option(name: .customLong("in-directory"), help: "A subdirectory of the resources directory.")
    var subdirectory: String?

    @Option(help: "Preferred languages, most preferred first, separated by commas (fr-CA,en).")
    var languages: String?

    @Flag(help: "Look the name up as an image, by UIImage's variant rules.")
    var image = false

    @Option(help: "The device's scale for --image: 1, 2 or 3.")
    var scale: Int?

    @Option(help: "The device's idiom for --image: phone or pad.")
    var idiom: String?

    @Flag(help: "A 4-inch phone for --image: -568h variants first.")
    var tall = false

    @Flag(name: .customLong("all-bundles"), help: "Search the *.bundle directories of the resources directory too.")
    var allBundles = false

    @Flag(help: "Print every candidate in the order tried, those that exist marked with *.")
    var candidates = false

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        if let scale, !(1...3).contains(scale) { throw ValidationError("--scale must be 1, 2 or 3, not \(scale)") }
        if let idiom, Device.Idiom(rawValue: idiom) == nil { throw ValidationError("--idiom must be phone or pad, not '\(idiom)'") }
        if !image && (scale != nil || idiom != nil || tall) { throw ValidationError("--scale, --idiom and --tall need --image") }
        for (what, text) in [("name", name), ("--in-directory", subdirectory ?? "")] {
            if text.hasPrefix("/") { throw ValidationError("the \(what) '\(text)' must be relative to the bundle") }
            if ResourcePath.names(text).contains("..") { throw ValidationError("the \(what) '\(text)' may not contain ..") }
        }
        if ResourcePath.names(name).isEmpty { throw ValidationError("the name must not be empty") }
    }

    var query: ResourceQuery {
        let device = image ? Device(scale: scale ?? 1, idiom: idiom.flatMap(Device.Idiom.init) ?? .phone, tall: tall) : nil
        let preferred = (languages ?? "").split(separator: ",").map { String($0).trimmedOfSpaces }.filter { !$0.isEmpty }
        return ResourceQuery(name: name, type: type, subdirectory: subdirectory ?? "", languages: preferred, image: device)
    }

    func run() throws {
        let tree: DirectoryTree
        // the resource rules work on text: a ROOT whose path is not UTF-8 is refused by name
        guard let root = RawPath(argument: root).text else {
            throw Failure("\(RawPath(argument: root)): resolve takes a ROOT whose path is UTF-8")
        }
        do {
            tree = try DirectoryTree(path: root)
        } catch {
            throw Failure("\(root): \(Paths.describe(error.code))")
        }
        let bundles = ResourceBundle(tree: tree).searched(nested: allBundles)
        var tried: [ResourceBundle.Candidate] = []
        var found: String? = nil
        for bundle in bundles where found == nil {
            if candidates { tried += bundle.candidates(for: query) }
            found = bundle.resolve(query)
        }
        let layer = found.flatMap { servingLayer($0) }
        let output = json ? jsonText(found, layer: layer, tried: tried) : text(found, layer: layer, tried: tried)
        if !output.isEmpty { print(output) }
        guard found != nil else { throw Failure("\(name): no resource of that name in \(root)") }
    }

    /// `which`'s words for `path` of ROOT, when ROOT is in a proxybundle mount.
    func servingLayer(_ path: String) -> WhichCommand.Answer? {
        guard let directory = Paths.canonical(Paths.absolute(RawPath(argument: root))) else { return nil }
        let full = directory.appending(path)
        guard let mount = RunningMount.containing(full) else { return nil }
        return try? WhichCommand.serving(full, in: mount, shownAs: full)
    }

    func text(_ found: String?, layer: WhichCommand.Answer?, tried: [ResourceBundle.Candidate]) -> String {
        var lines = tried.map { ($0.exists ? "* " : "  ") + $0.path }
        if let found {
            lines.append(found + (layer.map { "\t" + String(decoding: WhichCommand.words($0), as: UTF8.self) } ?? ""))
        }
        return lines.joined(separator: "\n")
    }

    func jsonText(_ found: String?, layer: WhichCommand.Answer?, tried: [ResourceBundle.Candidate]) -> String {
        var fields: [(String, String)] = [("path", found.map(JSON.string) ?? "null")]
        if let place = layer?.places.first {
            fields.append(("role", JSON.string(place.role)))
            fields.append(("backing_path", JSON.string(String(decoding: place.path, as: UTF8.self))))
        }
        if candidates {
            let list = tried.map { JSON.object([("path", JSON.string($0.path)), ("exists", $0.exists ? "true" : "false")]) }
            fields.append(("candidates", "[" + list.joined(separator: ",") + "]"))
        }
        return JSON.object(fields)
    }
}

extension String {
    /// Without the spaces at either end.
    var trimmedOfSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
