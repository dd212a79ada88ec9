// The control files' input, as the daemon reads and applies it, on an overlay of small layers
// in a scratch directory (no mount). The first byte of an input chooses the file, the rest is
// what was written to it:
// - `.invalidate` (0): `ControlInput.lines`, each line invalidated (`Overlay.invalidate`), or
//   the whole tree for none; then every name looked up before still shows as before;
// - `.layers` (1): `ControlInput.patchPaths` (the mountpoint is /mnt), each path opened as a
//   patch under the scratch directory (one naming `..` opens nothing) and the patches
//   replaced (`Overlay.replacePatches`); the overlay then serves the main bundle's names, and
//   the first patches are put back;
// - `.remount` (2): `RemountRequest`; a request taken has only finite, non-negative timeouts.
import FuzzSupport
#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

let scratch = Fuzzing.scratch("control")
for dir in ["main", "main/a", "main/a/b", "p1", "p1/a", "p2", "p2/a", "p2/a/b", "p2/d", "s", "mnt"] {
    mkdir(scratch + "/" + dir, 0o755)
}
Fuzzing.write(Array("c".utf8), to: scratch + "/main/a/b/c")
Fuzzing.write(Array("plist".utf8), to: scratch + "/main/Info.plist")
Fuzzing.write(Array("x".utf8), to: scratch + "/p1/a/x")
Fuzzing.write([], to: scratch + "/p2/a/b/.wh.gone")

func layer(_ name: String) -> Layer {
    do { return try Layer(path: RawPath(scratch + "/" + name), preservesAccessTimes: true) } catch {
        Fuzzing.fail("cannot open the layer \(name): \(error)")
    }
}
let firstPatches = [layer("p1"), layer("p2")]
let overlay: Overlay
do {
    overlay = try Overlay(main: layer("main"), patches: firstPatches, substitution: layer("s"), writable: true)
} catch {
    Fuzzing.fail("cannot make the overlay: \(error)")
}

/// The kinds of the entries along `path` from the root (nil where one is missing).
func kinds(_ path: [String]) -> [mode_t?] {
    var parent = rootNodeID
    let request = Request(overlay)
    return path.map { name in
        guard let entry = try? overlay.lookup(request, parent: parent, name: Array(name.utf8)) else { return nil }
        parent = entry.node
        return entry.attributes.st_mode & S_IFMT
    }
}
let shown = kinds(["a", "b", "c"])
guard shown == [S_IFDIR, S_IFDIR, S_IFREG] else { Fuzzing.fail("the overlay shows \(shown)") }

Fuzzing.run { data in
    guard let choice = data.first else { return }
    let text = Array(data.dropFirst())
    switch choice % 3 {
    case 0:
        let lines = ControlInput.lines(text)
        _ = kinds(["a", "b", "c"])
        if lines.isEmpty {
            _ = try? overlay.invalidate(subtree: nil)
        } else {
            for line in lines { _ = try? overlay.invalidate(subtree: line) }
        }
        guard kinds(["a", "b", "c"]) == shown else { Fuzzing.fail("an invalidation changed what shows") }
    case 1:
        guard let paths = try? ControlInput.patchPaths(text, mountpoint: "/mnt") else { return }
        guard paths.allSatisfy({ $0.isAbsolute && !$0.bytes.contains(0) && !$0.isInside("/mnt") }) else {
            Fuzzing.fail("a patch path taken is relative, holds a NUL, or lies in the mount")
        }
        var patches: [Layer] = []
        for path in paths {
            guard !path.bytes.split(separator: UInt8(ascii: "/")).contains(where: { $0.elementsEqual([0x2E, 0x2E]) }),
                  let opened = try? Layer(path: RawPath(bytes: Array(scratch.utf8) + path.bytes), preservesAccessTimes: true)
            else { return }
            patches.append(opened)
        }
        guard (try? overlay.replacePatches(patches)) != nil else { return }
        guard kinds(["Info.plist"]) == [S_IFREG] else { Fuzzing.fail("the main bundle's Info.plist does not show") }
        do { _ = try overlay.replacePatches(firstPatches) } catch { Fuzzing.fail("cannot put the first patches back: \(error)") }
    default:
        guard let request = try? RemountRequest(text) else { return }
        for value in [request.entry, request.attribute, request.negative].compactMap({ $0 }) where !value.isFinite || value < 0 {
            Fuzzing.fail("a remount took the timeout \(value)")
        }
    }
}
