import ArgumentParser
import ProxyBundleCore
import ProxyBundleDelivery
#if canImport(Glibc)
import Glibc
#endif

struct PushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Publish a substitution or patch directory as an OCI image (through skopeo).",
        discussion: """
            Writes SOURCE as one layer, as export does, into a temporary image layout and \
            copies it to REF with skopeo. With --base the image is the base image's layers plus \
            this one: a fleet's update is a base and a hotfix. Prints the manifest digest. \
            On a terminal, a status line shows the layer being written (bytes, entries, rate), \
            then skopeo shows the upload. With --sign-by, skopeo signs the image with that GPG \
            key (simple signing, the key in GNUPGHOME's keyring) and writes the signature to \
            the lookaside-staging directory registries.d names for the registry; fleet \
            machines read it from the matching lookaside URL (see pull).
            Example:
              proxybundle push ~/app-patch registry.example.com/myapp-patch:v3 --base registry.example.com/myapp-patch:base
              proxybundle push ~/app-patch registry.example.com/myapp-patch:v3 --sign-by 0123456789ABCDEF0123456789ABCDEF01234567
            """
    )

    @Argument(help: "A substitution or patch directory.")
    var source: String

    @Argument(help: "Where to: host/repository:tag, or a skopeo transport.")
    var reference: String

    @OptionGroup var image: ImageBuildOptions

    @Option(name: .customLong("sign-by"), help: ArgumentHelp(
        "Sign the image with this GPG key (a fingerprint or key ID in GNUPGHOME's keyring).", valueName: "key"))
    var signBy: String?

    func run() throws {
        let temporary = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((temporary + "/proxybundle-push-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure(text: "cannot make a temporary directory: \(Paths.describe(errno))") }
        let layout = String(cString: made)
        defer { try? Tree.remove(path: layout) }
        let digest = try image.export(source, layout: layout, tag: "push")
        var skopeo = image.registry.skopeo
        skopeo.policy = nil  // a policy is about what is pulled
        skopeo.signBy = signBy
        do { try skopeo.copy(from: "oci:\(layout):push", to: Skopeo.source(reference), pushing: true) } catch {
            throw Failure(text: "\(reference): \(error)")
        }
        print(digest)
    }
}
