import ArgumentParser
import ProxyBundleCore
import ProxyBundleDelivery
#if canImport(Glibc)
import Glibc
#endif

struct GCCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Remove the store's layers and blobs that no mount uses and no recent history names.",
        discussion: """
            A layer stays while a live mount has it as a patch (each mount's layers are read \
            from its daemon) or one of a mountpoint's last N images (layers --history) has it; \
            images that need a removed layer are dropped, then blobs no kept image reaches. \
            Holds the store's lock, so no pull or --set-image runs meanwhile. A mount whose \
            layers cannot be read stops it: nothing is removed.
            Example:
              proxybundle gc --keep 2
            """
    )

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp("History entries kept per mountpoint, with their layers (default 3).", valueName: "n"))
    var keep = 3

    func validate() throws {
        if keep < 0 { throw ValidationError("--keep takes a number of entries, 0 or more") }
    }

    func run() throws {
        let store = self.store.store
        let layers = Paths.canonical(RawPath(store.layersDirectory)) ?? RawPath(store.layersDirectory)
        var inUse: Set<String> = []
        for mount in RunningMount.all() {
            if mount.error == ENOTCONN || mount.error == ECONNABORTED { continue }  // its daemon died: it uses nothing
            guard mount.error == 0 else {
                throw Failure("cannot read the layers of \(mount.mountpoint) (\(StatusCommand.state(mount))); gc removed nothing")
            }
            for patch in mount.patches where patch.bytes.starts(with: layers.bytes + [UInt8(ascii: "/")]) {
                inUse.insert("sha256:" + String(decoding: patch.lastName, as: UTF8.self))
            }
        }
        var collect = Collect(store: store)
        collect.keep = keep
        do {
            let report = try collect.run(inUse: inUse)
            print("removed \(report.layersRemoved) layers and \(report.blobsRemoved) blobs (\(report.bytesFreed) bytes of blobs); "
                  + "kept \(report.layersKept) layers")
        } catch { throw Failure(text: "\(store.root): \(error)") }
    }
}
