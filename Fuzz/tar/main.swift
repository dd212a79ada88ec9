// The tar extraction of an untrusted layer (`LayerExtraction.extract`, as `pull` calls it), on
// any bytes taken as an uncompressed layer. Beside the layer's directory lies a directory
// with one file that nothing may touch. After every input:
// - accepted: the layer holds only directories, files and symlinks (devices and FIFOs dropped),
//   no set-ID bit and no overlay extended attribute; the work directory is empty;
// - refused: no layer directory, an empty work directory;
// - either way: nothing else in the scratch directory, the file outside as it was (content,
//   mode, one link).
import FuzzSupport
#if canImport(Glibc)
import Glibc
#endif
@testable import ProxyBundleDelivery

let scratch = Fuzzing.scratch("tar")
let blob = scratch + "/blob", target = scratch + "/layer", work = scratch + "/work"
let outside = scratch + "/outside", sentinel = outside + "/sentinel"
let sentinelText: [UInt8] = Array("outside the layer\n".utf8)
mkdir(work, 0o755)
mkdir(outside, 0o755)
Fuzzing.write(sentinelText, to: sentinel)
let expected = ["blob", "outside", "work"]

/// glibc's, which the Glibc module does not import (sys/xattr.h).
@_silgen_name("flistxattr")
func flistxattr(_ fd: Int32, _ list: UnsafeMutablePointer<CChar>?, _ size: Int) -> Int

/// What a layer may hold once extracted; fails on anything else.
func checkAccepted(_ dir: Int32, _ path: String) {
    for raw in Fuzzing.names(dir) {
        let name = String(cString: raw)  // for messages: a name that is not UTF-8 is reached by `raw`
        var st = stat()
        guard fstatat(dir, raw, &st, AT_SYMLINK_NOFOLLOW) == 0 else { Fuzzing.fail("cannot stat \(path)/\(name)") }
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG || kind == S_IFDIR || kind == S_IFLNK else {
            Fuzzing.fail("\(path)/\(name) has the kind \(String(kind, radix: 8)) (devices and FIFOs are dropped)")
        }
        if kind != S_IFLNK {
            guard st.st_mode & 0o6000 == 0 else { Fuzzing.fail("\(path)/\(name) keeps a set-ID bit") }
            let fd = openat(dir, raw, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else { Fuzzing.fail("cannot open \(path)/\(name)") }
            defer { close(fd) }
            var list = [CChar](repeating: 0, count: 65536)
            let size = flistxattr(fd, &list, list.count)
            if size > 0 {
                let names = list[0..<size].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
                if let bad = names.first(where: { $0.hasPrefix("trusted.overlay.") || $0.hasPrefix("user.overlay.") }) {
                    Fuzzing.fail("\(path)/\(name) has the attribute \(bad)")
                }
            }
            if kind == S_IFDIR { checkAccepted(fd, path + "/" + name) }
        }
    }
}

func checkOutside() {
    guard Fuzzing.entries(at: outside) == ["sentinel"] else { Fuzzing.fail("the directory outside changed: \(Fuzzing.entries(at: outside) ?? [])") }
    var st = stat()
    guard stat(sentinel, &st) == 0, st.st_nlink == 1, st.st_mode == S_IFREG | 0o644, st.st_size == sentinelText.count else {
        Fuzzing.fail("the file outside changed (links \(st.st_nlink), mode \(String(st.st_mode, radix: 8)))")
    }
    let fd = open(sentinel, O_RDONLY | O_CLOEXEC)
    var content = [UInt8](repeating: 0, count: 64)
    let n = read(fd, &content, content.count)
    close(fd)
    guard n == sentinelText.count, Array(content[0..<n]) == sentinelText else { Fuzzing.fail("the file outside was written") }
}

Fuzzing.run { data in
    Fuzzing.write(data, to: blob)
    let digest = "sha256:" + SHA256.hex(data)
    let layer = ImageLayout.Layer(digest: digest, mediaType: "application/vnd.oci.image.layer.v1.tar", diffID: digest)
    var accepted = false
    do {
        _ = try LayerExtraction.extract(blob: blob, layer: layer, to: target, work: work, limits: ExtractLimits())
        accepted = true
    } catch {
        _ = "\(error)"  // the one line the user is shown
    }
    let top = Fuzzing.entries(at: scratch) ?? []
    guard Fuzzing.entries(at: work) == [] else { Fuzzing.fail("the work directory keeps \(Fuzzing.entries(at: work) ?? [])") }
    checkOutside()
    if accepted {
        guard top == ["blob", "layer", "outside", "work"] else { Fuzzing.fail("the scratch directory holds \(top)") }
        let fd = open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { Fuzzing.fail("the accepted layer is no directory") }
        checkAccepted(fd, "layer")
        close(fd)
        Fuzzing.remove(target)
    } else {
        guard top == expected else { Fuzzing.fail("a refused layer left \(top)") }
    }
}
