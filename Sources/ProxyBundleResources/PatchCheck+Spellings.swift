#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// What letter case changes when the mount folds case (`-o casefold`): names of one layer
/// that differ only in case are one entry, so all but one of them never show.
extension PatchCheck {
    /// Entries of layer `index` a case-folding mount never shows, in byte order of their paths:
    /// of the names of one key in one directory, the first in byte order serves; when it is a
    /// directory the other directories of the key merge into it, and any other entry of the key
    /// is unreachable (`a.txt` beside `A.txt`: `a.txt`).
    func spellingFindings(in index: Int) -> [Finding] {
        var found: [Finding] = []
        spellings(index, [""], into: &found)
        return found.sorted { ResourcePath.byteOrder($0.path, $1.path) }
    }

    /// Checks the directories `paths` of layer `index`, which merge into one (spellings of
    /// one name), and the directories in them, by the rules of `FoldedMerge`.
    private func spellings(_ index: Int, _ paths: [String], into found: inout [Finding]) {
        var directories: [[FoldedMerge.Entry]] = []
        var byKey: [[UInt8]: [(directory: Int, name: [UInt8])]] = [:]
        for path in paths {
            var entries: [FoldedMerge.Entry] = []
            if let list = try? tree.layers[index].entries(LayerPath(path)) {
                for entry in list.entries {
                    let name = list.name(entry)
                    guard name != [0x2E], name != [0x2E, 0x2E], String(validating: name, as: UTF8.self) != nil else { continue }
                    entries.append(FoldedMerge.Entry(name: name, isDirectory: entry.type == UInt8(DT_DIR)))
                    if !Whiteout.hasPrefix(name) { byKey[CaseFold.key(name), default: []].append((directories.count, name)) }
                }
            }
            directories.append(entries)
        }
        let text = { (place: (directory: Int, name: [UInt8])) in
            ResourcePath.join(paths[place.directory], String(decoding: place.name, as: UTF8.self))
        }
        for served in FoldedMerge([FoldedMerge.Part(directories: directories)]).listing {
            let shown = served.places.map { (directory: $0.directory, name: $0.name) }
            for other in byKey[CaseFold.key(served.name)] ?? [] where !shown.contains(where: { $0 == other }) {
                let path = text(other)
                found.append(Finding(kind: .spelling, layer: index, path: path, other: text(shown[0]), otherLayer: index,
                                     bundle: ResourceBundle.nestedBundle(holding: path)))
            }
            if served.isDirectory { spellings(index, shown.map(text), into: &found) }
        }
    }

    /// Whether the layers below show `name` in `directory`: by any spelling when case folds.
    func shownBelow(_ name: String, in directory: String) -> Bool {
        guard let below else { return false }
        let path = ResourcePath.join(directory, name)
        return foldedBelow.map { $0.find(path) != nil } ?? below.tree.exists(path)
    }
}
