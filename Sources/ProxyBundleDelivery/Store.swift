import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

/// The content-addressed store: `oci/` an OCI image layout skopeo copies into (blobs shared by
/// digest), `layers/sha256/DIFFID` each layer extracted once, `layers/tmp/` extractions under
/// way (same file system, so a finished one is renamed into place), `images/TAG` what each
/// pulled reference resolved to, `lock` taken by every change, `in-use.lock` (see `markInUse`).
public struct Store: Sendable {
    public let root: String

    public init(root: String) { self.root = root }

    /// /var/lib/proxybundle as root, else $XDG_DATA_HOME/proxybundle or ~/.local/share/proxybundle.
    public static var defaultRoot: String {
        if geteuid() == 0 { return "/var/lib/proxybundle" }
        if let data = getenv("XDG_DATA_HOME").map({ String(cString: $0) }), data.hasPrefix("/") { return data + "/proxybundle" }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/"
        return home + "/.local/share/proxybundle"
    }

    public var layout: ImageLayout { ImageLayout(path: root + "/oci") }
    public var layersDirectory: String { root + "/layers/sha256" }
    var work: String { root + "/layers/tmp" }
    var images: String { root + "/images" }

    /// The directory of the layer with this diff-id (`sha256:HEX`).
    public func layerPath(_ diffID: String) -> String { layersDirectory + "/" + (ImageLayout.hex(of: diffID) ?? "invalid") }

    public func layerExists(_ diffID: String) -> Bool {
        var st = stat()
        return stat(layerPath(diffID), &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }

    /// Makes the store's directories (and its missing parents).
    public func prepare() throws {
        var parent = ""
        for part in root.split(separator: "/").dropLast() {  // ~/.local/share may not exist yet
            parent += (parent.isEmpty && !root.hasPrefix("/") ? "" : "/") + part
            _ = mkdir(parent, 0o755)
        }
        for dir in [root, root + "/oci", root + "/layers", layersDirectory, work, images] {
            guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
                throw DeliveryError("cannot create the store directory \(dir): \(String(cString: strerror(errno)))")
            }
        }
        let inUse = open(inUseLockPath, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)  // so a mount finds it to wait on
        if inUse >= 0 { close(inUse) }
    }

    /// Holds the store's lock (exclusive) until the returned descriptor is closed.
    public func lock() throws -> Int32 {
        let fd = open(root + "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw DeliveryError("cannot open \(root)/lock: \(String(cString: strerror(errno)))") }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { close(fd); throw DeliveryError("cannot lock the store \(root)") }
        }
        return fd
    }

    /// `in-use.lock`: held shared while a mount starts with the store's layers as patches, or
    /// a mount's patches are set to them, and exclusive by `gc` while it reads what live mounts
    /// use and removes the rest; so a layer gc did not see in use cannot become a patch before
    /// it is gone. (Apart from `lock`, which a pull holds for minutes.)
    var inUseLockPath: String { root + "/in-use.lock" }

    /// Holds `in-use.lock` exclusive until the returned descriptor is closed (gc).
    public func lockInUse() throws -> Int32 {
        let fd = open(inUseLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw DeliveryError("cannot open \(inUseLockPath): \(String(cString: strerror(errno)))") }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { close(fd); throw DeliveryError("cannot lock \(inUseLockPath)") }
        }
        return fd
    }

    /// Holds `in-use.lock` shared in every store that holds one of `paths` (a layer's directory
    /// or one inside it), waiting for a gc under way; returns the descriptors to close once
    /// the layers are in use. A store without the lock file (or whose lock cannot be opened)
    /// is passed over.
    public static func markInUse(_ paths: [[UInt8]]) -> [Int32] {
        var roots: [String] = []
        for path in paths {
            if let root = owning(layer: path)?.store.root, !roots.contains(root) { roots.append(root) }
        }
        return roots.compactMap { root in
            // never made here: a directory that only looks like a store gets no file (every
            // store has it from its first pull or gc, see `prepare`)
            let fd = open(Store(root: root).inUseLockPath, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            while flock(fd, LOCK_SH) != 0 {
                guard errno == EINTR else { close(fd); return nil }
            }
            return fd
        }
    }

    /// Removes extractions a killed pull left (called with the lock held).
    func clearWork() {
        let fd = open(work, O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        for name in (try? Tree.names(fd)) ?? [] { try? Tree.remove(fd, name) }
    }

    /// The tag a reference is kept under in the layout: its sha256, as a reference's own
    /// characters are not all allowed in a tag.
    public static func tag(for reference: String) -> String { "pb-" + String(SHA256.hex(Array(reference.utf8)).prefix(40)) }

    /// What `reference` resolved to when it was last pulled, if it was.
    public func recorded(_ reference: String) -> PulledImage? {
        guard let bytes = try? ImageLayout.read(images + "/" + Store.tag(for: reference), limit: 1 << 20),
              let json = try? JSON.parse(bytes) else { return nil }
        return PulledImage(json: json)
    }

    /// Every reference pulled into the store, as last resolved.
    public func records() -> [PulledImage] {
        let fd = open(images, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        return ((try? Tree.names(fd)) ?? []).compactMap { name in
            guard let bytes = try? ImageLayout.read(images + "/" + String(decoding: name, as: UTF8.self), limit: 1 << 20) else { return nil }
            return (try? JSON.parse(bytes)).flatMap(PulledImage.init(json:))
        }
    }

    /// The store a layer directory (`STORE/layers/sha256/HEX`), or a directory inside one,
    /// belongs to, and the layer's diff-id.
    public static func owning(layer path: [UInt8]) -> (store: Store, diffID: String)? {
        let parts = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count >= 4 else { return nil }
        for index in 1..<(parts.count - 2)
        where parts[index].elementsEqual("layers".utf8) && parts[index + 1].elementsEqual("sha256".utf8) {
            let diffID = "sha256:" + String(decoding: parts[index + 2], as: UTF8.self)
            guard ImageLayout.hex(of: diffID) != nil else { continue }
            let root = parts[..<index].joined(separator: [UInt8(ascii: "/")])
            return (Store(root: String(decoding: Array(root), as: UTF8.self)), diffID)
        }
        return nil
    }

    func record(_ image: PulledImage) throws {
        try Store.writeAtomically(images + "/" + Store.tag(for: image.reference), Array((image.json.text + "\n").utf8))
    }

    /// Writes `bytes` to a temporary file beside `path`, syncs it, renames it over `path`.
    static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw DeliveryError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw DeliveryError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        try LayerExtraction.syncDirectory(parentOf: path)
    }
}

/// A reference as pulled: the manifest it resolved to and its layers' diff-ids, bottom first;
/// the keys whose signatures the policy accepted it by (none: accepted without a signature),
/// and the manifest digest those signatures are for where it is not the layout's (skopeo writes
/// a Docker manifest into the layout as an OCI one).
public struct PulledImage: Sendable {
    public let reference: String
    public let manifestDigest: String
    public let diffIDs: [String]
    public var signers: [String] = []
    public var signedDigest: String?
    /// The digest of the manifest as the registry serves it, when that is the one pulled.
    public var registryDigest: String?

    /// The manifest digest its signatures are for.
    public var signatureDigest: String { signedDigest ?? manifestDigest }

    /// `signed by KEY` (each key that verified it), or `unverified`.
    public var verification: String { PulledImage.verification(signers) }

    public static func verification(_ signers: [String]) -> String {
        signers.isEmpty ? "unverified" : "signed by " + signers.joined(separator: ", ")
    }

    var fields: [(String, JSON)] {
        [("reference", .string(reference)), ("manifest", .string(manifestDigest)), ("layers", .array(diffIDs.map { .string($0) })),
         ("signedBy", .array(signers.map { .string($0) }))] + (signedDigest.map { [("signedManifest", .string($0))] } ?? [])
            + (registryDigest.map { [("registryManifest", .string($0))] } ?? [])
    }

    var json: JSON { .object(fields) }

    init(reference: String, manifestDigest: String, diffIDs: [String], signers: [String] = [], signedDigest: String? = nil) {
        self.reference = reference
        self.manifestDigest = manifestDigest
        self.diffIDs = diffIDs
        self.signers = signers
        self.signedDigest = signedDigest
    }

    init?(json: JSON) {
        guard let reference = json["reference"]?.string, let manifest = json["manifest"]?.string,
              let layers = json["layers"]?.array?.compactMap(\.string) else { return nil }
        self.init(reference: reference, manifestDigest: manifest, diffIDs: layers,
                  signers: json["signedBy"]?.array?.compactMap(\.string) ?? [], signedDigest: json["signedManifest"]?.string)
        registryDigest = json["registryManifest"]?.string
    }
}
