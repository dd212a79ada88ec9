import Foundation

/// A stack of thin patches as mods make them (the shape of `Scripts/bench/thin.pl`, smaller):
/// a main bundle of files in nested directories 2-4 deep, and patches of 1-5 entries each
/// anywhere in that tree: files replaced and added, whiteouts of files and of directories,
/// opaque directories, a file made a directory and a directory made a file. Deterministic for
/// a seed.
enum ThinStack {
    /// The main bundle's directories and files, as paths relative to its root.
    struct Tree {
        var directories: [String]
        var files: [String]
    }

    static func buildMain(_ main: String, directories count: Int = 40, files: Int = 300,
                          generator: inout OverlayScenario.Generator) throws -> Tree {
        var directories = (0..<6).map { "d\($0)" }
        while directories.count < count {
            let parent = directories[generator.below(directories.count)]
            guard parent.split(separator: "/").count < 4 else { continue }
            directories.append(parent + "/s\(directories.count)")
        }
        var paths: [String] = []
        let deep = directories.filter { $0.contains("/") }
        for index in 0..<files {
            let dir = generator.chance(90) ? deep[generator.below(deep.count)] : directories[generator.below(directories.count)]
            paths.append(dir + "/f\(index).dat")
        }
        for dir in directories { try Disk.mkdir(main + "/" + dir) }
        for file in paths { try Disk.write(main + "/" + file, "main \(file)") }
        return Tree(directories: directories, files: paths)
    }

    /// Writes `patch` (its number `number`) over `tree`: 1-5 entries, no two on one path.
    static func buildPatch(_ patch: String, number: Int, over tree: Tree,
                           generator: inout OverlayScenario.Generator) throws {
        let leaves = tree.directories.filter { dir in !tree.directories.contains { $0.hasPrefix(dir + "/") } }
        let shallow = tree.directories.filter { $0.split(separator: "/").count < 4 }
        try Disk.mkdir(patch)
        var taken: [String] = []
        let wanted = 1 + generator.below(5)
        while taken.count < wanted {
            let roll = generator.below(100)
            func pick(_ list: [String]) -> String { list[generator.below(list.count)] }
            let path: String
            let write: () throws -> Void
            switch roll {
            case 0..<50:
                path = pick(tree.files)
                write = { try Disk.write(patch + "/" + path, "p\(number) \(path)") }
            case 50..<70:
                path = pick(tree.directories) + "/n\(number)-\(taken.count).dat"
                write = { try Disk.write(patch + "/" + path, "p\(number) new") }
            case 70..<80:
                path = pick(tree.files)
                write = { try whiteout(patch, path) }
            case 80..<88:
                path = pick(shallow) + "/nd\(number)-\(taken.count)"
                write = { try Disk.write(patch + "/" + path + "/a.dat", "p\(number) new directory") }
            case 88..<93:
                path = pick(tree.files)
                write = { try Disk.write(patch + "/" + path + "/in\(number).dat", "p\(number) file made a directory") }
            case 93..<96:
                path = pick(leaves)
                write = {
                    try Disk.write(patch + "/" + path + "/o\(number).dat", "p\(number) opaque")
                    try Disk.opaque(patch + "/" + path)
                }
            case 96..<98:
                path = pick(leaves)
                write = { try whiteout(patch, path) }
            default:
                path = pick(leaves)
                write = { try Disk.write(patch + "/" + path, "p\(number) directory made a file") }
            }
            if taken.contains(where: { $0 == path || $0.hasPrefix(path + "/") || path.hasPrefix($0 + "/") }) { continue }
            taken.append(path)
            try write()
        }
    }

    /// A whiteout of `path` in `patch` (its directory made as needed).
    static func whiteout(_ patch: String, _ path: String) throws {
        let parent = (path as NSString).deletingLastPathComponent
        try Disk.mkdir(patch + "/" + parent)
        try Disk.whiteout(patch + "/" + parent, (path as NSString).lastPathComponent)
    }
}
