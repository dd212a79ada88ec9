import CSyscalls
import Foundation
import XCTest

// MARK: - walking and comparing

enum OverlayTree {
    struct Entry: Equatable {
        var type: String
        var mode: mode_t
        var uid: uid_t
        var gid: gid_t
        var size: Int  // -1 for directories
        var mtime: String
        var nlink: Int  // -1 for directories
        var target: String?
        var content: String?
        var xattrs: [String]
        var listedType: String = "-"  // d_type in the parent's readdir
        var followed: String = "-"  // what stat(2) finds through a symlink
        var inode: String  // "dev:ino", only to group hard links
    }

    /// Walks the mount at `proxy` and the kernel overlay at `kernel` and fails once, with every
    /// difference, if they are not the same; returns the mount's tree. Modification times from
    /// `since` on are shown as `(recent)` on both (two calls on two file systems never happen in
    /// the same nanosecond).
    @discardableResult
    static func assertSame(_ proxy: String, _ kernel: String, since: Int? = nil, label: String = "",
                           file: StaticString = #filePath, line: UInt = #line) throws -> [String: Entry] {
        let ours = try walk(proxy, recentFrom: since)
        let theirs = try walk(kernel, recentFrom: since)
        XCTAssertGreaterThan(theirs.count, 1, "\(label)the kernel overlay shows nothing", file: file, line: line)
        let found = differences(ours, theirs, leftName: "proxybundle", rightName: "overlayfs")
        let shown = found.prefix(300)
        XCTAssertTrue(found.isEmpty,
                      "\(label)\(found.count) difference(s) between proxybundle and kernel overlayfs "
                          + "(\(ours.count) vs \(theirs.count) paths):\n" + shown.joined(separator: "\n")
                          + (found.count > shown.count ? "\n..." : ""),
                      file: file, line: line)
        return ours
    }

    /// `walk`, with modification times from `since` on (if given) shown as `(recent)`.
    static func walk(_ root: String, recentFrom since: Int?) throws -> [String: Entry] {
        let entries = try walk(root)
        guard let since else { return entries }
        return entries.mapValues { entry in
            var entry = entry
            if let seconds = Int(entry.mtime.prefix { $0 != "." }), seconds >= since { entry.mtime = "(recent)" }
            return entry
        }
    }

    /// Every path below `root` ("" for the root itself), through readdir and lstat.
    /// Names listed twice in one directory are recorded as `duplicate` entries.
    static func walk(_ root: String) throws -> [String: Entry] {
        var entries: [String: Entry] = [:]
        var listedTypes: [String: UInt8] = [:]
        var pending = [""]
        while let relative = pending.popLast() {
            let path = relative.isEmpty ? root : root + "/" + relative
            var st = stat()
            guard lstat(path, &st) == 0 else {
                entries[relative] = Entry(type: "lstat failed: errno \(errno)", mode: 0, uid: 0, gid: 0, size: 0,
                                          mtime: "", nlink: 0, target: nil, content: nil, xattrs: [], inode: "")
                continue
            }
            let kind = st.st_mode & S_IFMT
            var entry = Entry(type: typeName(kind), mode: st.st_mode & 0o7777, uid: st.st_uid, gid: st.st_gid,
                              size: kind == S_IFDIR ? -1 : Int(st.st_size),
                              mtime: "\(st.st_mtim.tv_sec).\(String(format: "%09d", st.st_mtim.tv_nsec))",
                              nlink: kind == S_IFDIR ? -1 : Int(st.st_nlink), target: nil, content: nil,
                              xattrs: xattrs(path), inode: "\(st.st_dev):\(st.st_ino)")
            switch kind {
            case S_IFLNK:
                entry.target = Disk.readLink(path) ?? "(readlink failed)"
                var followed = stat()
                entry.followed = stat(path, &followed) == 0
                    ? typeName(followed.st_mode & S_IFMT) + " 0" + String(followed.st_mode & 0o7777, radix: 8) + " \(followed.st_size)"
                    : "errno \(errno)"
            case S_IFREG:
                do { entry.content = String(try ContentHash.of(path), radix: 16) } catch { entry.content = "\(error)" }
            case S_IFCHR, S_IFBLK:
                entry.content = "rdev \(st.st_rdev)"
            case S_IFDIR:
                var seen = Set<String>()
                for (name, type) in try list(path) {
                    let child = relative.isEmpty ? name : relative + "/" + name
                    if !seen.insert(name).inserted {
                        entries["duplicate " + child] = entry
                        continue
                    }
                    listedTypes[child] = type
                    pending.append(child)
                }
            default:
                break
            }
            if let type = listedTypes[relative] { entry.listedType = direntTypeName(type) }
            entries[relative] = entry
        }
        return entries
    }

    /// Names and d_type through readdir(3), "." and ".." excluded.
    static func list(_ path: String) throws -> [(String, UInt8)] {
        guard let dir = opendir(path) else { throw TestFailure("opendir \(path): errno \(errno)") }
        defer { closedir(dir) }
        var names: [(String, UInt8)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." {
                names.append((name, entry.pointee.d_type))
            }
        }
        return names
    }

    static func direntTypeName(_ type: UInt8) -> String {
        switch Int(type) {
        case Int(DT_REG): return "file"
        case Int(DT_DIR): return "directory"
        case Int(DT_LNK): return "symlink"
        case Int(DT_CHR): return "char device"
        case Int(DT_BLK): return "block device"
        case Int(DT_FIFO): return "fifo"
        case Int(DT_SOCK): return "socket"
        case Int(DT_UNKNOWN): return "unknown"
        default: return "d_type \(type)"
        }
    }

    static func typeName(_ kind: mode_t) -> String {
        switch kind {
        case S_IFREG: return "file"
        case S_IFDIR: return "directory"
        case S_IFLNK: return "symlink"
        case S_IFCHR: return "char device"
        case S_IFBLK: return "block device"
        case S_IFIFO: return "fifo"
        case S_IFSOCK: return "socket"
        default: return "type \(kind)"
        }
    }

    /// Names and values of the extended attributes, sorted.
    static func xattrs(_ path: String) -> [String] {
        var buffer = [CChar](repeating: 0, count: 65536)
        let length = llistxattr(path, &buffer, buffer.count)
        guard length >= 0 else { return ["llistxattr: errno \(errno)"] }
        let names = buffer[..<length].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return names.map { name in
            var value = [UInt8](repeating: 0, count: 65536)
            let size = lgetxattr(path, name, &value, value.count)
            return size < 0 ? "\(name) (errno \(errno))" : "\(name)=\(String(decoding: value[..<size], as: UTF8.self))"
        }.sorted()
    }

    /// Readable lines, one per difference; empty when the trees agree.
    static func differences(_ left: [String: Entry], _ right: [String: Entry],
                            leftName: String, rightName: String) -> [String] {
        var lines: [String] = []
        for path in Set(left.keys).union(right.keys).sorted() {
            let shown = path.isEmpty ? "(root)" : path
            guard let l = left[path] else {
                lines.append("only in \(rightName): \(shown) (\(right[path]!.type))")
                continue
            }
            guard let r = right[path] else {
                lines.append("only in \(leftName): \(shown) (\(l.type))")
                continue
            }
            func compare<T: Equatable>(_ what: String, _ a: T, _ b: T, _ describe: (T) -> String = { "\($0)" }) {
                if a != b { lines.append("\(shown): \(what) \(leftName)=\(describe(a)) \(rightName)=\(describe(b))") }
            }
            compare("type", l.type, r.type)
            compare("mode", l.mode, r.mode) { "0" + String($0, radix: 8) }
            compare("owner", "\(l.uid):\(l.gid)", "\(r.uid):\(r.gid)")
            compare("size", l.size, r.size)
            compare("mtime", l.mtime, r.mtime)
            compare("nlink", l.nlink, r.nlink)
            compare("symlink target", l.target, r.target) { $0 ?? "-" }
            compare("content", l.content, r.content) { $0 ?? "-" }
            compare("xattrs", l.xattrs, r.xattrs) { "[" + $0.joined(separator: ", ") + "]" }
            compare("d_type", l.listedType, r.listedType)
            compare("stat through the symlink", l.followed, r.followed)
        }
        let leftLinks = hardLinkGroups(left), rightLinks = hardLinkGroups(right)
        for group in leftLinks.subtracting(rightLinks).sorted() { lines.append("hard links only in \(leftName): \(group)") }
        for group in rightLinks.subtracting(leftLinks).sorted() { lines.append("hard links only in \(rightName): \(group)") }
        return lines
    }

    /// Paths of non-directories that share an inode, as "a = b = c".
    static func hardLinkGroups(_ entries: [String: Entry]) -> Set<String> {
        var groups: [String: [String]] = [:]
        for (path, entry) in entries where entry.type != "directory" && !entry.inode.isEmpty && !path.hasPrefix("duplicate ") {
            groups[entry.inode, default: []].append(path)
        }
        return Set(groups.values.filter { $0.count > 1 }.map { $0.sorted().joined(separator: " = ") })
    }
}
