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
            A layer stays while a live mount has it, or a directory inside it, as a patch \
            (each mount's layers are read from its daemon once the store's lock is held) or \
            one of a mountpoint's last N images (layers --history) has it; images that need a \
            removed layer are dropped, then blobs no kept image reaches. Holds the store's \
            lock, so no pull or --set-image runs meanwhile; a mount that starts, or a \
            layers --set, while it removes layers waits for it. A mount whose layers cannot \
            be read stops it: nothing is removed.
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
        var collect = Collect(store: store)
        collect.keep = keep
        do {
            let report = try collect.run { () throws(Failure) in try GCCommand.layersInUse(store) }
            print("removed \(report.layersRemoved) layers and \(report.blobsRemoved) blobs (\(report.bytesFreed) bytes of blobs); "
                  + "kept \(report.layersKept) layers")
        } catch let failure as Failure { throw failure } catch { throw Failure(text: "\(store.root): \(error)") }
    }

    /// The diff-ids of the store's layers that live mounts use: a patch that is a layer's
    /// directory or a directory inside one.
    static func layersInUse(_ store: Store) throws(Failure) -> Set<String> {
        let layers = Paths.canonical(RawPath(store.layersDirectory)) ?? RawPath(store.layersDirectory)
        let prefix = layers.bytes + [UInt8(ascii: "/")]
        var inUse: Set<String> = []
        for mount in RunningMount.all() {
            if mount.error == ENOTCONN || mount.error == ECONNABORTED { continue }  // its daemon died: it uses nothing
            guard mount.error == 0 else {
                throw Failure("cannot read the layers of \(mount.mountpoint) (\(StatusCommand.state(mount))); gc removed nothing")
            }
            for patch in mount.patches where patch.bytes.starts(with: prefix) {
                let layer = patch.bytes.dropFirst(prefix.count).prefix { $0 != UInt8(ascii: "/") }
                inUse.insert("sha256:" + String(decoding: layer, as: UTF8.self))
            }
        }
        return inUse
    }
}
