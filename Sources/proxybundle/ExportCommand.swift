import ArgumentParser
import ProxyBundleCore
import ProxyBundleDelivery
#if canImport(Glibc)
import Glibc
#endif

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a substitution or patch directory as an OCI image layout, without pushing it.",
        discussion: """
            SOURCE becomes one tar+gzip layer: names sorted, each directory's whiteouts first, \
            .wh.NAME and .wh..wh..opq as OCI defines them (overlayfs' forms converted), \
            symlinks, hard links and user.* attributes kept. With --base the image is the base \
            image's layers plus this one. Prints the manifest digest.
            Example:
              proxybundle export ~/app-patch --to oci:/srv/images/app:hotfix-3 --reproducible
            """
    )

    @Argument(help: "A substitution or patch directory.")
    var source: String

    @Option(help: ArgumentHelp("The image layout and tag: oci:DIR[:TAG] (TAG: latest).", valueName: "oci:dir[:tag]"))
    var to: String

    @OptionGroup var image: ImageBuildOptions

    func validate() throws {
        guard to.hasPrefix("oci:"), to.count > 4 else { throw ValidationError("--to takes oci:DIR[:TAG]") }
    }

    func run() throws {
        let rest = to.dropFirst(4)
        let parts = rest.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let directory = String(parts[0]), tag = parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : "latest"
        print(try image.export(source, layout: directory, tag: tag))
    }
}

/// What `export` and `push` share: the base image, reproducibility, how skopeo reaches it.
struct ImageBuildOptions: ParsableArguments {
    @Option(help: ArgumentHelp("An image whose layers go below this one (see pull for REF).", valueName: "ref"))
    var base: String?

    @Flag(help: "Owners 0 and every time SOURCE_DATE_EPOCH (or 0): the same tree gives the same digest.")
    var reproducible = false

    @OptionGroup var registry: RegistryOptions

    func export(_ source: String, layout: String, tag: String) throws(Failure) -> String {
        guard Paths.kind(RawPath(source)).isDirectory else { throw Failure(text: "\(source) is not a directory") }
        var export = Export()
        export.reproducible = reproducible
        export.skopeo = registry.skopeo
        export.progress = Progress.terminal()
        do { return try export.export(source, layout: layout, tag: tag, base: base) } catch {
            throw Failure(text: "\(source): \(error)")
        }
    }
}
