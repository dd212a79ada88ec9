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
            Prints one finding per line, naming the file and its layer: an image variant some \
            devices (scale 1, 2, 3; phone, pad; tall or not) pass over for a lower layer's \
            variant; a localized file (en.lproj/F) a global F always beats; a whiteout that \
            hides nothing; a name that differs only in letter case from one below it (both \
            show). Exit status 1 when something is found, 0 when nothing is. The layers are \
            read as they are on disk (what the mount shows after an invalidation).
            Example:
              proxybundle check /mnt/myapp
            """
    )

    @Argument(help: "The mountpoint of a proxybundle mount.")
    var mountpoint: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

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
                    layers.append(try WhichCommand.layer(layer.path, of: mount))
                } catch {
                    throw Failure("cannot open the \(layer.role) \(layer.path): \(Paths.describe(error.code))")
                }
            }
            tree = try LayeredTree(layers: layers)
        } catch let error as ResourceError {
            throw Failure("cannot merge the layers of \(mountpoint): \(Paths.describe(error.code))")
        }
        let findings = PatchCheck(tree: tree).findings()
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
                    ("text", JSON.string(finding.text(name))),
                ])
            }.joined(separator: ",") + "]")
        } else {
            for finding in findings { print(finding.text(name)) }
        }
        if !findings.isEmpty { throw ExitCode(1) }
    }
}
