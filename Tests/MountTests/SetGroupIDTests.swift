import Foundation
import XCTest

/// The set-group-ID bit where no write is involved: a change of mode by a user outside the
/// file's group drops it, and a set-group-ID directory gives its group (and, to a directory,
/// the bit) to what is made in it. Compared with kernel overlayfs over the same layers.
final class SetGroupIDTests: XCTestCase {
    /// A group user nobody is not in.
    private static let otherGroup: gid_t = 4242

    func testModeChangesAndNewEntriesInSetGroupIDDirectoriesAsOnKernelOverlayfs() throws {
        try compareWithKernelOverlayfs(options: ["-o", "allow_other"])
    }

    /// With POSIX ACLs the daemon, not the kernel, applies the umask of new entries.
    func testTheSameWithPOSIXACLs() throws {
        try compareWithKernelOverlayfs(options: ["-o", "allow_other,acl"])
    }

    private func compareWithKernelOverlayfs(options: [String]) throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        for (layer, directory) in [("main", fx.main), ("patch", fx.substitution)] {
            try makeEntries(in: directory, layer: layer)
        }
        let kernel = fx.root + "/kernel", kernelUpper = fx.root + "/kernel-upper"
        let copy = try Spawn.run("/bin/cp", ["-a", fx.substitution, kernelUpper])
        XCTAssertEqual(copy.status, 0, copy.error)
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mountWritable(fx, at: kernel, upper: kernelUpper)
        try fx.start(options)
        for root in [fx.mountpoint, kernel] {
            try run(asNobody: true, userCommands(in: root))
            try run(asNobody: false, rootCommands(in: root))
        }
        let names = try allNames(under: kernel)
        XCTAssertGreaterThan(names.count, 20)
        for name in names {
            XCTAssertEqual(owner(fx.inMount(name)), owner(kernel + "/" + name), name)
            XCTAssertEqual(owner(fx.inSubstitution(name)), owner(fx.inMount(name)), "\(name) in the substitution")
        }
        XCTAssertEqual(try allNames(under: fx.mountpoint), names)
    }

    /// Per layer: files and directories of user nobody to change the mode of (group root, and
    /// nobody's own group), one of root's, and set-group-ID directories of a group nobody is
    /// not in, writable by all.
    private func makeEntries(in directory: String, layer: String) throws {
        for (name, gid) in [("root", gid_t(0)), ("own", gid_t(65534))] {
            try Disk.write(directory + "/chmod-file-\(name)-\(layer)", "data\n")
            try Disk.mkdir(directory + "/chmod-dir-\(name)-\(layer)")
            for kind in ["file", "dir"] {
                XCTAssertEqual(chown(directory + "/chmod-\(kind)-\(name)-\(layer)", 65534, gid), 0)
            }
        }
        try Disk.write(directory + "/chmod-file-byroot-\(layer)", "data\n")
        XCTAssertEqual(chown(directory + "/chmod-file-byroot-\(layer)", 0, Self.otherGroup), 0)
        for name in ["sgid-\(layer)", "sgid-\(layer)/nested"] {
            try Disk.mkdir(directory + "/" + name)
            XCTAssertEqual(chown(directory + "/" + name, 0, Self.otherGroup), 0)
            XCTAssertEqual(chmod(directory + "/" + name, 0o2777), 0)
        }
    }

    private func userCommands(in root: String) -> [String] {
        var commands: [String] = []
        for layer in ["main", "patch"] {
            for name in ["root", "own"] {
                commands.append("chmod 2755 '\(root)/chmod-file-\(name)-\(layer)' '\(root)/chmod-dir-\(name)-\(layer)'")
            }
            for sgid in ["sgid-\(layer)", "sgid-\(layer)/nested"] {
                let d = "'\(root)/\(sgid)"
                commands.append("mkdir \(d)/made-dir' && mkdir -p \(d)/made-a/b' && touch \(d)/made-file'")
                commands.append("mkfifo \(d)/made-fifo' && ln -s target \(d)/made-link'")
                commands.append("mkdir -m 2700 \(d)/made-dir-2700' && install -m 2755 /dev/null \(d)/made-file-2755'")
            }
        }
        return commands
    }

    private func rootCommands(in root: String) -> [String] {
        var commands: [String] = []
        for layer in ["main", "patch"] {
            commands.append("chmod 2755 '\(root)/chmod-file-byroot-\(layer)'")
            commands.append("mkdir '\(root)/sgid-\(layer)/root-dir' && touch '\(root)/sgid-\(layer)/nested/root-file'")
            commands.append("install -m 2755 /dev/null '\(root)/sgid-\(layer)/root-file-2755'")
        }
        return commands
    }

    private func run(asNobody: Bool, _ commands: [String]) throws {
        let shell = ["/bin/sh", "-c", commands.joined(separator: " && ")]
        let result = asNobody
            ? try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups"] + shell, seconds: 20)
            : try Spawn.run(shell[0], Array(shell.dropFirst()), seconds: 20)
        XCTAssertEqual(result.status, 0, result.error)
    }

    /// Mode bits (octal), owner and group of `path`.
    private func owner(_ path: String) -> String? {
        Disk.lstat(path).map { "\(String($0.st_mode & 0o7777, radix: 8)) \($0.st_uid):\($0.st_gid)" }
    }

    private func allNames(under root: String) throws -> [String] {
        var names: [String] = []
        for name in try Disk.list(root).sorted() {
            names.append(name)
            if let st = Disk.lstat(root + "/" + name), st.st_mode & S_IFMT == S_IFDIR {
                names += try allNames(under: root + "/" + name).map { name + "/" + $0 }
            }
        }
        return names
    }
}
