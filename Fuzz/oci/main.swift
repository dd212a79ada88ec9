// The OCI image layout reader (`ImageLayout.image(tag:)`, as `pull` reads what skopeo
// copied): index.json, then the index or manifest it names, then the config, each a JSON
// document from a registry.
//
// An input is documents separated by a line `--`: the first is index.json, the others blobs
// 1, 2, ... A blob is stored under its own digest; `@N` in a document stands for blob N's
// digest (`sha256:HEX`, of blob N as written), so that inputs can name each other (a blob may
// name only blobs after it). The image asked for is tagged `latest`.
// Checks: whatever is read is refused with an error or gives an image whose layers are as
// many as the config's diff-ids, each with sha256 digests, and whose blobs include the
// manifest and the config. The first document is also read as `pull` reads the registry's
// manifest before fetching anything (`RemoteManifest.contents`): an image's layers as many as
// its `layers` lists, or an index's chosen entry a sha256 digest.
import FuzzSupport
#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleDelivery

let scratch = Fuzzing.scratch("oci")
let layout = scratch + "/layout"
let separator: [UInt8] = Array("\n--\n".utf8)

/// `data` cut at every `separator`.
func documents(_ data: [UInt8]) -> [[UInt8]] {
    var parts: [[UInt8]] = []
    var start = 0, at = 0
    while at + separator.count <= data.count {
        if data[at..<at + separator.count].elementsEqual(separator) {
            parts.append(Array(data[start..<at]))
            at += separator.count
            start = at
        } else {
            at += 1
        }
    }
    parts.append(Array(data[start...]))
    return parts
}

/// `document` with each `@N` (N a digit) replaced by `digests[N]`, where there is one.
func substitute(_ document: [UInt8], _ digests: [Int: [UInt8]]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(document.count)
    var at = 0
    while at < document.count {
        if document[at] == UInt8(ascii: "@"), at + 1 < document.count, let digest = digests[Int(document[at + 1]) - 0x30] {
            out += digest
            at += 2
        } else {
            out.append(document[at])
            at += 1
        }
    }
    return out
}

Fuzzing.run { data in
    let parts = documents(data)
    guard parts.count <= 10 else { return }
    switch try? RemoteManifest.contents(of: parts[0]) {
    case .index(let chosen)?:
        guard ImageLayout.hex(of: chosen) != nil else { Fuzzing.fail("an index's entry chosen without a sha256 digest: \(chosen)") }
    case .image(let layers)?:
        guard layers >= 0 else { Fuzzing.fail("a negative number of layers") }
    case nil: break
    }
    Fuzzing.remove(layout)
    mkdir(layout, 0o755)
    mkdir(layout + "/blobs", 0o755)
    mkdir(layout + "/blobs/sha256", 0o755)
    Fuzzing.write(Array(#"{"imageLayoutVersion":"1.0.0"}"#.utf8), to: layout + "/oci-layout")
    var digests: [Int: [UInt8]] = [:]
    for number in stride(from: parts.count - 1, through: 1, by: -1) {
        let blob = substitute(parts[number], digests)
        let hex = SHA256.hex(blob)
        Fuzzing.write(blob, to: layout + "/blobs/sha256/" + hex)
        digests[number] = Array(("sha256:" + hex).utf8)
    }
    Fuzzing.write(substitute(parts[0], digests), to: layout + "/index.json")
    do {
        let image = try ImageLayout(path: layout).image(tag: "latest")
        guard image.blobs.contains(image.manifestDigest), image.blobs.contains(image.configDigest) else {
            Fuzzing.fail("the image's blobs lack its manifest or config")
        }
        for layer in image.layers {
            guard ImageLayout.hex(of: layer.digest) != nil, ImageLayout.hex(of: layer.diffID) != nil,
                  image.blobs.contains(layer.digest) else { Fuzzing.fail("a layer without sha256 digests: \(layer)") }
            _ = try? LayerExtraction.compression(of: layer.mediaType)
        }
    } catch {
        _ = "\(error)"
    }
}
