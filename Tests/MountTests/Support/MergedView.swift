import CSyscalls
import Foundation

/// The visible tree of an overlay, two ways: computed from the main bundle and the substitution
/// as they are on disk (what a fresh mount must show), and walked through a mount.
///
/// The computation follows the rules of docs/MERGED-VIEW.md and nothing of the daemon's code: the
/// substitution's entry wins; `.wh.NAME` (or a character device 0/0 named NAME) hides the main
/// bundle's NAME in that directory only; `.wh..wh..opq` (or the xattr `trusted.overlay.opaque`
/// or `user.overlay.opaque` = `y`) hides all of the main bundle's entries of that directory; no
/// `.wh.*` name is shown (so neither is the work directory `.wh..wh.work`); a directory in both
/// layers is merged unless the substitution also whites it out; the root's control files
/// `.invalidate` and `.stats` hide entries of those names.
enum MergedView {
    struct Node: Equatable, CustomStringConvertible {
        var kind: String
        var mode: mode_t
        var size: Int  // -1 for directories
        var content: String?  // hash of a file, target of a symlink, rdev of a device
        var description: String {
            "\(kind) 0\(String(mode, radix: 8))" + (size >= 0 ? " \(size) bytes" : "") + (content.map { " " + $0 } ?? "")
        }
    }

    static let controlFiles: Set<String> = [".invalidate", ".stats", ".layers"]

    /// What a fresh mount of these two layers must show, by relative path ("" is the root).
    static func expected(main: String, substitution: String) throws -> [String: Node] {
        var nodes: [String: Node] = [:]
        try merge(main: main, substitution: substitution, relative: "", into: &nodes)
        return nodes
    }

    private static func merge(main: String?, substitution: String?, relative: String,
                              into nodes: inout [String: Node]) throws {
        nodes[relative] = try node((substitution ?? main)!)  // in both layers, the substitution's is shown
        var upper: [String: stat] = [:]
        var hidden = Set<String>()
        var opaque = false
        if let substitution {
            opaque = isOpaqueByXattr(substitution)
            for name in try names(substitution) {
                if name == ".wh..wh..opq" {
                    opaque = true
                } else if name.hasPrefix(".wh.") {
                    hidden.insert(String(name.dropFirst(4)))
                } else if let st = Disk.lstat(substitution + "/" + name) {
                    if st.st_mode & S_IFMT == S_IFCHR && st.st_rdev == 0 {
                        hidden.insert(name)
                    } else {
                        upper[name] = st
                    }
                }
            }
        }
        var lower: [String: stat] = [:]
        if let main, !opaque {
            for name in try names(main) where !hidden.contains(name) && !name.hasPrefix(".wh.") {
                if let st = Disk.lstat(main + "/" + name) { lower[name] = st }
            }
        }
        for name in Set(upper.keys).union(lower.keys) {
            if relative.isEmpty && controlFiles.contains(name) { continue }
            let child = relative.isEmpty ? name : relative + "/" + name
            if let st = upper[name] {
                let path = substitution! + "/" + name
                if st.st_mode & S_IFMT == S_IFDIR {
                    let below = lower[name].flatMap { $0.st_mode & S_IFMT == S_IFDIR ? main! + "/" + name : nil }
                    try merge(main: below, substitution: path, relative: child, into: &nodes)
                } else {
                    nodes[child] = try node(path)
                }
            } else if let st = lower[name] {
                let path = main! + "/" + name
                if st.st_mode & S_IFMT == S_IFDIR {
                    try merge(main: path, substitution: nil, relative: child, into: &nodes)
                } else {
                    nodes[child] = try node(path)
                }
            }
        }
    }

    private static func isOpaqueByXattr(_ path: String) -> Bool {
        for name in ["trusted.overlay.opaque", "user.overlay.opaque"] {
            var value = [UInt8](repeating: 0, count: 8)
            let count = lgetxattr(path, name, &value, value.count)
            if count == 1 && value[0] == UInt8(ascii: "y") { return true }
        }
        return false
    }

    /// What the mount shows, by relative path, through readdir, lstat, read and readlink.
    static func walk(_ root: String) throws -> [String: Node] {
        var nodes: [String: Node] = [:]
        var pending = [""]
        while let relative = pending.popLast() {
            let path = relative.isEmpty ? root : root + "/" + relative
            let node = try node(path)
            nodes[relative] = node
            guard node.kind == "directory" else { continue }
            var seen = Set<String>()
            for name in try names(path) where !(relative.isEmpty && controlFiles.contains(name)) {
                guard seen.insert(name).inserted else { throw TestFailure("\(path) lists \(name) twice") }
                pending.append(relative.isEmpty ? name : relative + "/" + name)
            }
        }
        return nodes
    }

    static func node(_ path: String) throws -> Node {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw TestFailure("lstat \(path): errno \(errno)") }
        let mode = st.st_mode & 0o7777
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            return Node(kind: "directory", mode: mode, size: -1)
        case S_IFREG:
            return Node(kind: "file", mode: mode, size: Int(st.st_size), content: String(try ContentHash.of(path), radix: 16))
        case S_IFLNK:
            var buffer = [CChar](repeating: 0, count: 4097)
            let count = readlink(path, &buffer, buffer.count - 1)
            guard count >= 0 else { throw TestFailure("readlink \(path): errno \(errno)") }
            return Node(kind: "symlink", mode: 0, size: Int(st.st_size),
                        content: "-> " + String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self))
        default:
            return Node(kind: "special \(st.st_mode & S_IFMT)", mode: mode, size: 0, content: "rdev \(st.st_rdev)")
        }
    }

    /// Every name in a directory but "." and "..", through readdir(3).
    static func names(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw TestFailure("opendir \(path): errno \(errno)") }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw TestFailure("readdir \(path): errno \(errno)") }
                return names
            }
            let name = String(cString: directoryEntryName(entry))
            if name != "." && name != ".." { names.append(name) }
        }
    }

    /// One line per path that differs, sorted; empty when the trees are the same.
    static func differences(_ left: [String: Node], _ right: [String: Node],
                            _ leftName: String, _ rightName: String) -> [String] {
        var lines: [String] = []
        for path in Set(left.keys).union(right.keys).sorted() {
            let shown = path.isEmpty ? "(root)" : path
            switch (left[path], right[path]) {
            case let (a?, b?) where a != b:
                lines.append("\(shown): \(leftName) \(a), \(rightName) \(b)")
            case let (a?, nil):
                lines.append("\(shown): only in \(leftName) (\(a))")
            case let (nil, b?):
                lines.append("\(shown): only in \(rightName) (\(b))")
            default:
                break
            }
        }
        return lines
    }

    static func describe(_ nodes: [String: Node]) -> String {
        nodes.keys.sorted().map { "  \($0.isEmpty ? "(root)" : $0): \(nodes[$0]!)" }.joined(separator: "\n")
    }
}

/// The name of an entry readdir(3) returned, read where it lies: not `entry.pointee.d_name`,
/// which copies 256 bytes, past the end of a short last record (AddressSanitizer noticed).
func directoryEntryName(_ entry: UnsafePointer<dirent>) -> UnsafePointer<CChar> {
    UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19)
        .assumingMemoryBound(to: CChar.self)
}
