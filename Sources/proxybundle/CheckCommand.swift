import ArgumentParser
import ProxyBundleCore
import ProxyBundleResources
#if canImport(Glibc)
import Glibc
#endif

struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Find what the substitution and the patches of a mount hold that will never take effect.",
        discussion: """
            Prints one finding per line, naming the file and its layer, by CoreFoundation's and \
            UIImage's lookup rules (see `resolve`): an image variant some devices pass over for \
            a lower layer's variant; a loose image the asset catalog (Assets.car) serves \
            instead; a generic file a ~ipad or ~iphone twin below replaces on that idiom; a \
            localized file (en.lproj/F) a global F always beats, or that another spelling of \
            its language (en.lproj over English.lproj) always beats; a global file added over \
            localized copies, which every language then gets; a whiteout, or a new .lproj, that \
            moves languages to other files (which, from what to what); a whiteout that hides \
            nothing; a source file (.xib, .storyboard, .xcassets, .xcstrings) the app never \
            loads; a name that differs only in letter case from one below it (both show); with \
            --casefold, instead, names of one layer that differ only in letter case (of a.txt \
            and A.txt, a.txt never shows). \
            Every bundle inside the app (Kit.bundle at any depth, Frameworks/X.framework, \
            PlugIns/X.appex) is checked by its own rules, its resources directory, Info.plist \
            and languages (following the app's choice unless the app allows mixed \
            localizations; an extension choosing its own), and its findings name it. \
            Devices checked: those the app is made for (Info.plist's UIDeviceFamily, or \
            LSRequiresIPhoneOS: phones; phone and pad when it does not say), at scale 2 and 3 \
            (what current iOS versions run on); a macOS app (Contents/): scale 1 and 2 without \
            an idiom; --scales and --idioms choose, --tall adds the 4-inch phone. Languages: \
            every localization of each bundle (and of the app, for a bundle that follows it). \
            Exit status 1 when something is found, 0 when nothing is. The layers are read as \
            they are on disk (what the mount shows after an invalidation).
            Examples:
              proxybundle check /mnt/myapp
              proxybundle check /mnt/myapp --scales 1,2,3 --idioms pad
              proxybundle check /mnt/myapp --tall
            """
    )

    @Argument(help: "The mountpoint of a proxybundle mount.")
    var mountpoint: String

    @Option(help: "The device scales to check, separated by commas (1, 2, 3); default 2,3 (1,2 for a macOS app).")
    var scales: String?

    @Option(help: ArgumentHelp("The devices to check, separated by commas: phone, pad, tall-phone (a 4-inch phone, scale 2), none (no idiom, a Mac); default: those the app is made for.",
                               valueName: "idioms"),
            completion: .list(["phone", "pad", "tall-phone", "none"]))
    var idioms: String?

    @Flag(help: "Check the 4-inch phone too (tall-phone): a NAME-568h@2x image comes first there.")
    var tall = false

    @Flag(help: "Match names ignoring letter case and Unicode normalization: a case-only difference from a name below replaces it (no finding); names of one layer that differ only in case are reported, all but the first in byte order never show.")
    var casefold = false

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        _ = try devices(madeFor: nil)
    }

    /// The devices of --scales, --idioms and --tall, for an app made for `madeFor`
    /// (`ResourceBundle.madeFor`) where they do not say.
    func devices(madeFor: [Device.Idiom]?) throws -> [Device] {
        let scales = try scales.map { list in
            try list.split(separator: ",", omittingEmptySubsequences: false).map { word in
                guard let scale = Int(String(word).trimmedOfSpaces), (1...3).contains(scale) else {
                    throw ValidationError("--scales takes 1, 2 or 3 separated by commas, not '\(word)'")
                }
                return scale
            }
        }
        let kinds = try idioms.map { list in
            try list.split(separator: ",", omittingEmptySubsequences: false).map { word in
                let kind = String(word).trimmedOfSpaces
                guard ["phone", "pad", "tall-phone", "none"].contains(kind) else {
                    throw ValidationError("--idioms takes phone, pad, tall-phone or none separated by commas, not '\(word)'")
                }
                return kind
            }
        }
        // what is not given is what the app is made for
        let defaults = Device.checked(madeFor: madeFor)
        var devices: [Device] = []
        for scale in scales ?? defaults.map(\.scale) {
            for kind in kinds ?? defaults.map(\.kind) where kind != "tall-phone" {
                let device = Device(scale: scale, idiom: Device.Idiom(rawValue: kind))
                if !devices.contains(device) { devices.append(device) }
            }
        }
        if tall || kinds?.contains("tall-phone") == true {
            guard scales?.contains(2) ?? true else {
                throw ValidationError("tall-phone is a scale 2 device (every 4-inch phone is): --scales leaves out 2")
            }
            devices.append(Device.tallPhone)
        }
        return devices
    }

    func run() throws {
        let mountpoint = RawPath(argument: self.mountpoint)
        let absolute = Paths.canonical(Paths.absolute(mountpoint)) ?? Paths.absolute(mountpoint)
        guard let mount = RunningMount.at(absolute) else { throw Failure("\(mountpoint) is not a proxybundle mount") }
        guard mount.isAlive else { throw mount.unreachable }
        let roles = mount.layers
        let tree: LayeredTree
        do {
            var layers: [Layer] = []
            for layer in roles {
                do {
                    // read byte for byte: the check folds names itself where the mount does
                    layers.append(try WhichCommand.layer(layer.path, of: mount, foldsNames: false))
                } catch {
                    throw Failure("cannot open the \(layer.role) \(layer.path): \(Errno(error.code).description)")
                }
            }
            tree = try LayeredTree(layers: layers)
        } catch let error as ResourceError {
            throw Failure("cannot merge the layers of \(mountpoint): \(Errno(error.code).description)")
        }
        let devices = try devices(madeFor: ResourceBundle(tree: tree).madeFor)
        let check = PatchCheck(tree: tree, devices: devices, foldsCase: casefold || mount.foldsNames)
        let findings = check.findings()
        for (path, reason) in check.unreadableInfo {
            Failure("\(mountpoint)/\(path): \(reason); checked as a bundle without an Info.plist").report()
        }
        // a patch is named with its path (there may be several); the substitution and the
        // main bundle by their role
        let name = { (index: Int) -> String in roles[index].role == "patch" ? "patch \(roles[index].path.description)" : roles[index].role }
        if json {
            print("[" + findings.map { finding in
                JSON.object([
                    ("kind", JSON.string(finding.kind.rawValue)),
                    ("path", JSON.string(finding.path)),
                    ("role", JSON.string(roles[finding.layer].role)),
                    ("layer", JSON.path(roles[finding.layer].path)),
                    ("other", finding.other.map(JSON.string) ?? "null"),
                    ("other_role", finding.otherLayer.map { JSON.string(roles[$0].role) } ?? "null"),
                    ("devices", "[" + finding.devices.map { JSON.string($0.description) }.joined(separator: ",") + "]"),
                    ("languages", "[" + finding.languages.map(JSON.string).joined(separator: ",") + "]"),
                    ("detail", finding.detail.map(JSON.string) ?? "null"),
                    ("bundle", finding.bundle.map(JSON.string) ?? "null"),
                    ("text", JSON.string(finding.text(checked: devices, name))),
                ])
            }.joined(separator: ",") + "]")
        } else {
            for finding in findings { print(finding.text(checked: devices, name)) }
        }
        if !findings.isEmpty { throw ExitCode(1) }
    }
}
