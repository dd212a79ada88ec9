import Foundation
import ProxyBundleCore
import XCTest

/// What ships: the man page (current and clean), the completion scripts, and the Debian
/// package, installed on this machine, mounting through fstab, and removed again.
final class PackageTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    private static let manPage = repository + "/docs/proxybundle.8"

    /// Fails (never skips) when a program the test needs is missing: Scripts/bootstrap.sh
    /// installs each, and a skip would lose the coverage on every machine that lacks it.
    static func require(_ programs: [String]) throws {
        let missing = programs.filter { !FileManager.default.isExecutableFile(atPath: $0) }
        guard missing.isEmpty else { throw TestFailure("missing \(missing.joined(separator: ", ")): run Scripts/bootstrap.sh") }
    }

    /// The executable as the package ships it: the Swift runtime and ICU linked statically
    /// (`-static-stdlib`), every other library the system's, no run path. A debug build, in a
    /// scratch path of its own (made here once, and again only where the sources changed).
    static let packagedBinary: Result<String, Error> = Result {
        let build = try Spawn.run("/usr/bin/env", ["swift", "build", "--package-path", repository, "--scratch-path",
                                                   repository + "/.build-static", "-Xswiftc", "-static-stdlib",
                                                   "--disable-local-rpath", "--product", "proxybundle"],
                                  environment: ["PATH=/opt/swift/usr/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")],
                                  seconds: 3600)
        guard build.status == 0 else { throw TestFailure("building the packaged executable: \(build.output.suffix(2000))\(build.error)") }
        return repository + "/.build-static/debug/proxybundle"
    }

    /// Scripts/package.sh run on the packaged executable, into `output`; returns the .deb's path.
    static func package(into output: String) throws -> String {
        let built = try Spawn.run("/bin/bash", [repository + "/Scripts/package.sh", "--binary", try packagedBinary.get(),
                                                "--output", output], seconds: 1200)
        guard built.status == 0 else { throw TestFailure("package.sh: \(built.error)") }
        return built.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// One package of the packaged executable for the tests that install it (a debug binary
    /// of 70 MB takes minutes to package on a busy machine); removed after the last test.
    static let packageDirectory = NSTemporaryDirectory() + "pb-packaged-\(getpid())"
    static let packaged: Result<String, Error> = Result {
        try Disk.mkdir(packageDirectory)
        return try package(into: packageDirectory)
    }

    override class func tearDown() {
        try? FileManager.default.removeItem(atPath: packageDirectory)
        super.tearDown()
    }

    /// `man -l` renders the page without a warning, and it names every command and every
    /// option the built binary's help lists (Scripts/man.sh makes it again when they change).
    func testTheManPageIsCleanAndCurrent() throws {
        let rendered = try Spawn.run("/usr/bin/man", ["--warnings", "-l", Self.manPage], environment: ["MANWIDTH=100"])
        XCTAssertEqual(rendered.status, 0, rendered.error)
        XCTAssertEqual(rendered.error, "", "warnings rendering the man page")
        let lines = rendered.output.split(separator: "\n")
        for line in [lines.first, lines.last].compactMap({ $0 }) {
            XCTAssertTrue(line.contains("proxybundle") && !line.contains("BSD"), "header or footer: \(line)")
        }
        let text = try String(contentsOfFile: Self.manPage, encoding: .utf8)
        for section in ["LAYERS AND WHITEOUTS", "CONTROL FILES", "FILES", "EXIT STATUS", "EXAMPLES", "BUGS"] {
            XCTAssertTrue(text.contains(".Sh \(section)"), "no \(section) section")
        }
        let commands = ["mount", "unmount", "invalidate", "status", "which", "layers", "resolve", "check", "version"]
        for command in commands {
            let help = try proxybundle(["help", command])
            XCTAssertEqual(help.status, 0)
            XCTAssertTrue(text.contains(".It Em \(command)\n"), "the man page lacks \(command): run Scripts/man.sh")
            let abstract = help.output.split(separator: "\n").first.map { $0.dropFirst("OVERVIEW: ".count) } ?? ""
            XCTAssertTrue(text.replacingOccurrences(of: "\n", with: " ").contains(abstract.prefix(40)),
                          "\(command)'s summary changed: run Scripts/man.sh")
            for option in help.output.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," })
            where option.hasPrefix("--") && option.count > 2
                && option.dropFirst(2).allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }) {
                XCTAssertTrue(text.contains("Fl " + option.dropFirst()), "\(command) \(option) is not in the man page: run Scripts/man.sh")
            }
        }
    }

    /// Each completion script loads in its shell and completes a command name.
    func testCompletionScriptsLoadInTheirShells() throws {
        let dir = NSTemporaryDirectory() + "pb-completions-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for shell in ["bash", "zsh", "fish"] {
            let script = try proxybundle(["--generate-completion-script", shell])
            XCTAssertEqual(script.status, 0, script.error)
            try script.output.write(toFile: dir + "/" + shell, atomically: true, encoding: .utf8)
        }
        let bash = try Spawn.run("/bin/bash", ["-c", "source \(dir)/bash && complete -p proxybundle"])
        XCTAssertEqual(bash.status, 0, bash.error)
        XCTAssertTrue(bash.output.contains("proxybundle"), bash.output)
        try Self.require(["/usr/bin/zsh", "/usr/bin/fish"])
        let zsh = try Spawn.run("/usr/bin/zsh", ["-f", "-c", "autoload -U compinit && compinit -u -D && source \(dir)/zsh && whence -w _proxybundle"])
        XCTAssertEqual(zsh.status, 0, zsh.output + zsh.error)
        XCTAssertTrue(zsh.output.contains("_proxybundle: function"), zsh.output + zsh.error)
        let fish = try Spawn.run("/usr/bin/fish", ["--no-config", "-c", "source \(dir)/fish; complete -C 'proxybundle reso'"],
                                 environment: ["HOME=\(dir)"])
        XCTAssertEqual(fish.status, 0, fish.error)
        XCTAssertTrue(fish.output.hasPrefix("resolve"), fish.output + fish.error)
        // values too: -o's options, --idiom's and --scale's
        for (line, expected) in [("proxybundle mount /a /b -o ", "entry_timeout="), ("proxybundle remount /b -o ", "ro\t"),
                                 ("proxybundle resolve /x --idiom ", "phone\t"), ("proxybundle resolve /x --scale ", "3\t")] {
            let values = try Spawn.run("/usr/bin/fish", ["--no-config", "-c", "source \(dir)/fish; complete -C '\(line)'"],
                                       environment: ["HOME=\(dir)"])
            XCTAssertTrue(values.output.split(separator: "\n").contains { $0.hasPrefix(expected) }, line + ": " + values.output)
        }
    }

    /// The markdown links of `text` that lead to a file of the repository (no scheme, no anchor).
    static func relativeLinks(_ text: String) -> [String] {
        text.components(separatedBy: "](").dropFirst().compactMap { rest in
            guard let end = rest.firstIndex(of: ")") else { return nil }
            let link = String(rest[..<end])
            return link.contains(":") || link.hasPrefix("#") || link.contains(" ") ? nil : link
        }
    }

    /// Two runs of Scripts/package.sh give the same bytes, also from two compilations; lintian
    /// finds no error or warning, with no override; the binary ships stripped with its symbols
    /// in the dbgsym package, under its build id, linking glibc, libfuse3 and liburing as
    /// shared libraries named in Depends; the package root is 0755 and owned by root; md5sums
    /// and the Debian changelog are there.
    func testThePackageIsReproducibleAndLintianClean() throws {
        let root = NSTemporaryDirectory() + "pb-package-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        // the second build packages the binary as another compilation of the commit gives it:
        // other module hashes in .swift_modhash, so another build id from the linker
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let binary = try Self.packagedBinary.get()
        _ = try Self.packaged.get()
        let recompiled = root + "/proxybundle"
        try FileManager.default.copyItem(atPath: binary, toPath: recompiled)
        try Self.scramble([".swift_modhash", ".note.gnu.build-id"], of: recompiled)
        // the first run is the package the other tests install; a time taken from the clock would
        // differ between the two runs, minutes apart
        try FileManager.default.copyItem(atPath: Self.packageDirectory, toPath: root + "/a")
        var debs = [try FileManager.default.contentsOfDirectory(atPath: root + "/a").sorted()]
        try FileManager.default.createDirectory(atPath: root + "/b", withIntermediateDirectories: true)
        let built = try Spawn.run("/bin/bash", [Self.repository + "/Scripts/package.sh", "--binary", recompiled,
                                                "--output", root + "/b"], seconds: 1200)
        XCTAssertEqual(built.status, 0, built.error)
        debs.append(try FileManager.default.contentsOfDirectory(atPath: root + "/b").sorted())
        XCTAssertEqual(debs[0], debs[1])
        XCTAssertEqual(debs[0].count, 2, "\(debs[0])")
        guard let main = debs[0].first(where: { !$0.contains("dbgsym") }), let symbols = debs[0].first(where: { $0.contains("dbgsym") })
        else { return XCTFail("\(debs[0])") }
        // the debug symbols keep the compilation's own module hashes
        XCTAssertEqual(Probe.bytes(root + "/a/" + main), Probe.bytes(root + "/b/" + main), "\(main) differs between two builds")
        let listing = try Spawn.run("/usr/bin/dpkg-deb", ["-c", root + "/a/" + main]).output
        XCTAssertTrue(listing.hasPrefix("drwxr-xr-x root/root"), listing)
        for path in ["./usr/share/doc/proxybundle/changelog.Debian.gz", "./usr/share/doc/proxybundle/copyright",
                     "./usr/lib/systemd/system/proxybundle@.service"] {
            XCTAssertTrue(listing.contains(" " + path + "\n"), "\(path) is not in the package")
        }
        XCTAssertFalse(listing.contains("mount.fuse.proxybundle"), "fuse3's mount.fuse serves fuse.proxybundle")
        XCTAssertFalse(listing.contains("lintian/overrides"), "nothing is overridden")
        let control = try Spawn.run("/usr/bin/dpkg-deb", ["-I", root + "/a/" + main]).output
        XCTAssertTrue(control.contains("md5sums"), control)
        XCTAssertFalse(control.contains("@localhost"), control)
        // Depends from the libraries' shlibs: each package that ships a library the binary links
        let depends = control.split(separator: "\n").first { $0.hasPrefix(" Depends: ") }.map(String.init) ?? ""
        for package in ["libc6 (>= 2.36)", "libfuse3-3 (>= ", "liburing2 (>= ", "libssl3 (>= ", "libstdc++6 (>= ", "fuse3"] {
            XCTAssertTrue(depends.contains(package), "Depends lacks \(package): \(depends)")
        }
        let needed = try Spawn.run("/usr/bin/readelf", ["-d", "-W", binary]).output
        for library in ["libc.so.6", "libfuse3.so.3", "liburing.so.2", "libcrypto.so.3"] {
            XCTAssertTrue(needed.contains("Shared library: [\(library)]"), "\(library) is not linked dynamically: \(needed)")
        }
        XCTAssertFalse(needed.contains("libswiftCore") || needed.contains("libFoundation") || needed.contains("ICU"),
                       "the Swift runtime and ICU are linked statically: \(needed)")
        XCTAssertFalse(needed.contains("RPATH") || needed.contains("RUNPATH"), needed)
        XCTAssertTrue(needed.contains("RELR"), "relative relocations are packed: \(needed)")
        let copyright = try String(contentsOfFile: Self.repository + "/docs/debian/copyright", encoding: .utf8)
        XCTAssertFalse(copyright.contains("written offer") || copyright.contains("6(c)") || copyright.contains("linked statically, with"),
                       "no LGPL library is linked statically, so no offer is made")
        let unpacked = root + "/unpacked"
        XCTAssertEqual(try Spawn.run("/usr/bin/dpkg-deb", ["-x", root + "/a/" + main, unpacked]).status, 0)
        XCTAssertEqual(try Spawn.run("/usr/bin/dpkg-deb", ["-x", root + "/a/" + symbols, unpacked]).status, 0)
        let sections = try Spawn.run("/usr/bin/readelf", ["-S", "-n", unpacked + "/usr/bin/proxybundle"]).output
        XCTAssertFalse(sections.contains(".symtab") || sections.contains(".debug_info"), "the binary is not stripped")
        let id = sections.components(separatedBy: "Build ID: ").last?.prefix(40) ?? ""
        let debugFile = unpacked + "/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug"
        let debugSections = try Spawn.run("/usr/bin/readelf", ["-S", debugFile])
        XCTAssertTrue(debugSections.output.contains(".debug_info"), debugFile + debugSections.error)

        try Self.require(["/usr/bin/lintian"])
        let lint = try Spawn.run("/usr/bin/lintian", ["--allow-root", root + "/a/" + main, root + "/a/" + symbols], seconds: 600)
        let findings = lint.output.split(separator: "\n").filter { $0.hasPrefix("E:") || $0.hasPrefix("W:") || $0.hasPrefix("O:") }
        XCTAssertEqual(findings, [], lint.output + lint.error)
    }

    /// Changes the last byte of each of `sections` of the ELF file `path` (as `readelf -S` finds them).
    static func scramble(_ sections: [String], of path: String) throws {
        let table = try Spawn.run("/usr/bin/readelf", ["-S", "-W", path]).output
        guard let file = FileHandle(forUpdatingAtPath: path) else { throw TestFailure("cannot open \(path)") }
        defer { try? file.close() }
        for name in sections {
            guard let line = table.split(separator: "\n").first(where: { $0.split(separator: " ").contains(Substring(name)) })
            else { throw TestFailure("\(path) has no \(name)") }
            let fields = line.split(separator: "]").last?.split(separator: " ") ?? []
            guard fields.count > 4, let offset = UInt64(fields[3], radix: 16), let size = UInt64(fields[4], radix: 16), size > 0
            else { throw TestFailure("cannot read \(line)") }
            try file.seek(toOffset: offset + size - 1)
            let byte = try file.read(upToCount: 1) ?? Data([0])
            try file.seek(toOffset: offset + size - 1)
            try file.write(contentsOf: Data([byte[0] ^ 0xff]))
        }
    }

    /// Scripts/package.sh builds a .deb (of `packagedBinary`); installed, it mounts
    /// through an fstab line, its man page renders, and removing it leaves nothing behind.
    /// All of it in a private system (PrivateSystem: /usr, /etc and /var overlaid in a mount
    /// namespace of the test's), so it runs whatever the machine has installed, and leaves
    /// the machine's packages as they were.
    func testTheDebianPackageInstallsMountsAndRemoves() throws {
        let fx = try MountFixture(name)
        let system = try PrivateSystem(scratch: fx.root + "/system")
        defer {
            _ = try? system.run("/bin/umount", ["-l", fx.mountpoint])
            system.remove()
            fx.tearDown()
        }
        func exists(_ path: String) throws -> Bool { try system.run("/usr/bin/test", ["-e", path]).status == 0 }
        let deb = try Self.packaged.get()
        XCTAssertTrue(deb.hasPrefix(Self.packageDirectory + "/proxybundle_\(Version.number)-1~deb"), deb)
        let install = try system.run("/usr/bin/dpkg", ["-i", deb])
        XCTAssertEqual(install.status, 0, install.output + install.error)
        let version = try system.run("/usr/bin/proxybundle", ["--version"])
        XCTAssertTrue(version.output.hasPrefix("proxybundle \(Version.number) "), version.output)
        let man = try system.run("/usr/bin/man", ["--warnings", "proxybundle"], environment: ["MANWIDTH=100"])
        XCTAssertEqual(man.status, 0, man.error)
        XCTAssertEqual(man.error, "")
        XCTAssertTrue(man.output.contains("LAYERS AND WHITEOUTS"), man.output)
        // the template unit is installed, not enabled
        XCTAssertTrue(try exists("/usr/lib/systemd/system/proxybundle@.service"))
        let wants = try system.run("/usr/bin/find", ["/etc/systemd/system", "-name", "proxybundle@*"])
        XCTAssertEqual(wants.output, "")
        // every relative link of the installed README leads to a file the package installed
        let doc = "/usr/share/doc/proxybundle/"
        let readme = try system.run("/bin/cat", [doc + "README.md"]).output
        let links = Self.relativeLinks(readme)
        XCTAssertTrue(links.contains("docs/MERGED-VIEW.md"), "\(links)")
        for link in links { XCTAssertTrue(try exists(doc + link), "the installed README links \(link)") }

        // the installed helper serves an fstab line (the directory of the test's own binary
        // is not where mount.fuse3 looks: only the package's /usr/bin copy can answer)
        try Disk.write(fx.inMain("Info.plist"), "main")
        let fstab = fx.root + "/fstab"
        try Disk.write(fstab, "\(fx.main) \(fx.mountpoint) fuse.proxybundle substitution=\(fx.substitution),nofail 0 0\n")
        let mounted = try system.run("/bin/mount", ["-a", "-T", fstab], environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
        XCTAssertEqual(mounted.status, 0, mounted.error)
        let shown = try system.run("/bin/findmnt", ["-n", "-o", "FSTYPE,VFS-OPTIONS", fx.mountpoint])
        XCTAssertTrue(shown.output.hasPrefix("fuse.proxybundle "), shown.output)
        let options = shown.output.split(separator: " ").last.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } } ?? []
        XCTAssertTrue(options.contains("nosuid") && options.contains("nodev"), "fstab mounts are nosuid,nodev: \(shown.output)")
        XCTAssertEqual(try system.run("/bin/cat", [fx.inMount("Info.plist")]).output, "main")
        XCTAssertFalse(fx.isMounted, "the mount stays in the test's namespace")
        let unmounted = try system.run("/usr/bin/proxybundle", ["unmount", fx.mountpoint])
        XCTAssertEqual(unmounted.status, 0, unmounted.error)

        let removed = try system.run("/usr/bin/dpkg", ["-r", "proxybundle"])
        XCTAssertEqual(removed.status, 0, removed.error)
        for path in ["/usr/bin/proxybundle", "/usr/sbin/mount.fuse.proxybundle", "/usr/share/man/man8/proxybundle.8.gz"] {
            XCTAssertFalse(try exists(path), "\(path) left behind")
        }
    }

    /// On a clean Debian root of the machine's release (debootstrap's minbase: no libfuse, no
    /// liburing, no fuse3), `apt-get install ./proxybundle_….deb` pulls in the libraries the
    /// binary links from Debian's mirror, and every command works there: help for each, a
    /// mount with a write, which, status, invalidate, layers --set, remount, resolve, check,
    /// unmount, an fstab mount through fuse3's mount.fuse, export, pull (through skopeo,
    /// recommended and installed with it) and gc.
    func testThePackageInstallsOnACleanDebianRootWithItsLibrariesFromApt() throws {
        let scratch = NSTemporaryDirectory() + "pb-clean-root-\(getpid())"
        try Disk.mkdir(scratch)
        let root = try DebianRoot(scratch: scratch)
        defer {
            for mountpoint in ["/mnt/app", "/mnt/fstab"] { _ = try? root.run("/bin/umount", ["-l", mountpoint]) }
            root.remove()
            try? FileManager.default.removeItem(atPath: scratch)
        }
        @discardableResult
        func run(_ command: String, _ arguments: [String] = [], status: Int32 = 0, seconds: Double = 120,
                 line: UInt = #line) throws -> String {
            let result = try root.run(command, arguments, environment: ["DEBIAN_FRONTEND=noninteractive"], seconds: seconds)
            XCTAssertEqual(result.status, status, "\(command) \(arguments.joined(separator: " ")): \(result.output)\(result.error)",
                           line: line)
            return result.output
        }
        let libraries = ["libfuse3.so.3": "libfuse3-3", "liburing.so.2": "liburing2", "libcrypto.so.3": "libssl3"]
        for library in libraries.keys {
            try run("/bin/sh", ["-c", "ls /lib/*/\(library) /usr/lib/*/\(library)"], status: 2)
        }
        let deb = (try Self.packaged.get() as NSString).lastPathComponent
        try FileManager.default.copyItem(atPath: try Self.packaged.get(), toPath: root.path + "/tmp/" + deb)
        try run("/usr/bin/apt-get", ["update", "-qq"], seconds: 900)
        try run("/usr/bin/apt-get", ["install", "-y", "-qq", "/tmp/" + deb], seconds: 1800)
        for (library, package) in libraries {
            XCTAssertTrue(try run("/usr/bin/dpkg-query", ["-S", library]).hasPrefix(package + ":"), "\(library) from \(package)")
        }
        let linked = try run("/usr/bin/ldd", ["/usr/bin/proxybundle"])
        XCTAssertFalse(linked.contains("not found"), linked)
        for library in ["libc.so.6", "libfuse3.so.3", "liburing.so.2", "libcrypto.so.3"] {
            XCTAssertTrue(linked.contains(library + " => /lib/") || linked.contains(library + " => /usr/lib/"), linked)
        }
        XCTAssertTrue(try run("/usr/bin/proxybundle", ["--version"]).hasPrefix("proxybundle \(Version.number) "))
        let commands = ["mount", "unmount", "invalidate", "status", "which", "layers", "pull", "push", "export", "gc",
                        "remount", "resolve", "check", "version"]
        for command in commands { try run("/usr/bin/proxybundle", ["help", command]) }

        // a bundle, a patch, and the mount's directories, in the root
        let files = ["srv/app/Info.plist": "<plist><dict><key>CFBundleDevelopmentRegion</key><string>en</string></dict></plist>", "srv/app/en.lproj/Hello.txt": "hello", "srv/app/Images/icon@2x.png": "2x",
                     "srv/patch/Images/icon@2x.png": "patched"]
        for (path, text) in files { try Disk.write(root.path + "/" + path, text) }
        for dir in ["srv/sub", "mnt/app", "mnt/fstab"] { try Disk.mkdir(root.path + "/" + dir) }
        let pb = "/usr/bin/proxybundle"
        try run(pb, ["mount", "/srv/app", "/mnt/app", "--substitution", "/srv/sub"])
        XCTAssertEqual(try run("/bin/cat", ["/mnt/app/en.lproj/Hello.txt"]), "hello")
        try run("/bin/sh", ["-c", "echo changed > /mnt/app/en.lproj/Hello.txt"])
        XCTAssertEqual(try Disk.read(root.path + "/srv/sub/en.lproj/Hello.txt"), "changed\n")
        XCTAssertTrue(try run(pb, ["which", "/mnt/app/en.lproj/Hello.txt"]).hasPrefix("substitution "))
        XCTAssertTrue(try run(pb, ["status"]).contains("/mnt/app"))
        try run(pb, ["invalidate", "/mnt/app"])
        try run(pb, ["layers", "/mnt/app", "--set", "/srv/patch"])
        XCTAssertEqual(try run("/bin/cat", ["/mnt/app/Images/icon@2x.png"]), "patched")
        XCTAssertTrue(try run(pb, ["resolve", "/mnt/app", "Hello.txt"]).hasPrefix("en.lproj/Hello.txt"))
        let checked = try root.run(pb, ["check", "/mnt/app"])
        XCTAssertTrue(checked.status == 0 || checked.status == 1, checked.error)
        XCTAssertEqual(checked.error, "")
        try run(pb, ["remount", "/mnt/app", "-o", "ro"])
        try run("/bin/sh", ["-c", "echo x > /mnt/app/new.txt"], status: 2)
        try run(pb, ["unmount", "/mnt/app"])
        // fuse3 (a dependency) runs the installed binary for an fstab line
        try Disk.write(root.path + "/etc/fstab", "/srv/app /mnt/fstab fuse.proxybundle substitution=/srv/sub,nofail 0 0\n")
        try run("/bin/mount", ["/mnt/fstab"])
        XCTAssertEqual(try run("/bin/cat", ["/mnt/fstab/en.lproj/Hello.txt"]), "changed\n")
        try run(pb, ["unmount", "/mnt/fstab"])
        // an image layout written and pulled through skopeo, then the store collected
        try run(pb, ["export", "/srv/patch", "--to", "oci:/tmp/layout:v1"])
        let pulled = try run(pb, ["pull", "oci:/tmp/layout:v1", "--store", "/tmp/store"], seconds: 300)
        let layer = pulled.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try Disk.read(root.path + layer + "/Images/icon@2x.png"), "patched")
        try run(pb, ["gc", "--store", "/tmp/store", "--keep", "0"])
    }
}
