import Foundation
import ProxyBundleCore
import XCTest

/// Every flag of `mount` and every `-o` option, both spellings where there are two, reaches
/// what it changes (issue 45: `--casefold` was checked and then dropped on the way to the
/// daemon). One table: each entry is mounted as a user types it through the built binary, and
/// its effect read in `.stats`, the mount table or behaviour. The `-o` entries go through
/// `proxybundle mount` detached and in the foreground and through mount(8) (`mount -t
/// fuse.proxybundle`, run by fuse3's mount.fuse3); the flags through `proxybundle mount`
/// both ways. The table must name every flag and option `mount --experimental-dump-help`
/// lists, so a new one cannot be added without its entry.
final class MountFlagTests: XCTestCase {
    var fx: MountFixture!
    var other = ""
    var patchA = ""
    var patchB = ""
    var list = ""

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        other = fx.root + "/other"
        patchA = fx.root + "/patchA"
        patchB = fx.root + "/patchB"
        list = fx.root + "/patches.txt"
        for dir in [other, patchA, patchB] { try Disk.mkdir(dir) }
        try Disk.write(fx.inMain("Data/main.txt"), "main")
        try Disk.write(patchA + "/DATA/a.txt", "a")
        try Disk.write(patchB + "/data/b.txt", "b")
        try Disk.write(list, "\(patchA)\n\(patchB)\n")
        try fx.guardUnchanged([patchA, patchB])
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
    }

    override func tearDown() { fx?.tearDown() }

    /// How an entry is mounted.
    enum Way: CaseIterable { case detached, foreground, helper }

    /// One row: the words after `MAIN MOUNTPOINT` (a `-o` list alone for options), what it
    /// covers (flags as `--name`, options by name), and its effect.
    struct Entry {
        var words: [String]
        var covers: [String]
        var ways: [Way]
        var check: (MountFlagTests) throws -> Void
    }

    private func stat(_ key: String) throws -> String? { try fx.stats()[key] }
    private func patches() throws -> [String] {
        try Disk.read(fx.inMount(".stats")).split(separator: "\n").filter { $0.hasPrefix("patch: ") }.map { String($0.dropFirst(7)) }
    }
    private func mountOptions() -> [String] { MountTable.current().mount(at: fx.mountpoint)?.options ?? [] }
    private func superOptions() -> [String] { MountTable.current().mount(at: fx.mountpoint)?.superOptions ?? [] }
    private func names(_ relative: String) throws -> [String] { try Disk.list(fx.inMount(relative)).sorted() }

    private func option(_ list: String, _ covers: [String], ways: [Way] = Way.allCases,
                        _ check: @escaping (MountFlagTests) throws -> Void) -> Entry {
        Entry(words: ["-o", list], covers: covers, ways: ways, check: check)
    }

    private func flag(_ words: [String], _ covers: [String], ways: [Way] = [.detached, .foreground],
                      _ check: @escaping (MountFlagTests) throws -> Void) -> Entry {
        Entry(words: words, covers: covers, ways: ways, check: check)
    }

    private var table: [Entry] {
        let seconds = { (key: String, value: String) in
            self.option("\(key)=\(value)", [key]) { t in XCTAssertEqual(try t.stat(key), value) }
        }
        return [
            // the flags
            flag(["--casefold", "--patch", patchA, "--patch", patchB], ["--casefold"]) { t in
                XCTAssertEqual(try t.stat("casefold"), "on")
                XCTAssertEqual(try t.names(""), ["DATA"], "one directory for Data, DATA and data")
                XCTAssertEqual(try t.names("data"), ["a.txt", "b.txt", "main.txt"])
            },
            flag(["--substitution", other], ["--substitution"]) { t in XCTAssertEqual(try t.stat("substitution"), t.other) },
            flag(["--no-substitution"], ["--no-substitution"]) { t in
                XCTAssertEqual(try t.stat("read_only"), "yes")
                XCTAssertNil(try t.stat("substitution"))
            },
            flag(["--patch", patchA, "--patch", patchB], ["--patch"]) { t in XCTAssertEqual(try t.patches(), [t.patchA, t.patchB]) },
            flag(["--patches-from", list], ["--patches-from"]) { t in XCTAssertEqual(try t.patches(), [t.patchA, t.patchB]) },
            flag(["--log-level", "debug", "--log-file", fx.root + "/flag.log"], ["--log-level", "--log-file"]) { t in
                XCTAssertEqual(rmdir(t.fx.inMount("Data")), -1)
                try eventually("the failed rmdir is logged at debug level") {
                    ((try? Disk.read(t.fx.root + "/flag.log")) ?? "").contains("ENOTEMPTY")
                }
            },
            flag(["--syslog"], ["--syslog"], ways: [.foreground]) { t in
                let status = try proxybundle(["status", t.fx.mountpoint]).output
                XCTAssertTrue(status.contains("log: syslog") || status.contains("(syslog was not reachable)"), status)
            },
            flag(["--foreground"], ["--foreground", "-o"], ways: [.detached]) { t in
                XCTAssertEqual(try t.stat("pid"), String(t.fx.daemon), "the command is the daemon")
            },
            // the daemon's own options
            option("casefold", ["casefold"]) { t in
                XCTAssertEqual(try t.stat("casefold"), "on")
                XCTAssertEqual(try t.names(""), ["Data"])
            },
            option("casefold,nocasefold", ["nocasefold"]) { t in XCTAssertEqual(try t.stat("casefold"), "off") },
            seconds("entry_timeout", "7"),
            seconds("attr_timeout", "8"),
            seconds("negative_timeout", "9"),
            option("nocache", ["nocache"]) { t in
                for key in ["entry_timeout", "attr_timeout", "negative_timeout"] { XCTAssertEqual(try t.stat(key), "0") }
            },
            option("max_threads=3", ["max_threads"]) { t in XCTAssertEqual(try t.stat("max_threads"), "3") },
            option("spin=0", ["spin"]) { t in XCTAssertEqual(try t.stat("spin"), "0") },
            option("ro", ["ro"]) { t in
                XCTAssertEqual(try t.stat("read_only"), "yes")
                XCTAssertEqual(mkdir(t.fx.inMount("made"), 0o755), -1)
                XCTAssertEqual(errno, EROFS)
            },
            option("ro,rw", ["rw"]) { t in XCTAssertEqual(try t.stat("read_only"), "no") },
            option("nosubstitution", ["nosubstitution"]) { t in
                XCTAssertEqual(try t.stat("read_only"), "yes")
                XCTAssertNil(try t.stat("substitution"))
            },
            option("acl", ["acl"]) { t in XCTAssertEqual(try t.stat("posix_acl"), "on") },
            option("acl,noacl", ["noacl"]) { t in XCTAssertEqual(try t.stat("posix_acl"), "off") },
            option("watch", ["watch"]) { t in XCTAssertEqual(try t.stat("watch"), "on") },
            option("watch,nowatch", ["nowatch"]) { t in XCTAssertEqual(try t.stat("watch"), "off") },
            option("transport=device", ["transport"]) { t in XCTAssertEqual(try t.stat("transport"), "device") },
            option("substitution=\(other)", ["substitution"]) { t in
                XCTAssertEqual(try t.stat("substitution"), t.other)
            },
            option("patches=\(patchA):\(patchB)", ["patches"]) { t in XCTAssertEqual(try t.patches(), [t.patchA, t.patchB]) },
            option("patches-from=\(list)", ["patches-from"]) { t in XCTAssertEqual(try t.patches(), [t.patchA, t.patchB]) },
            option("log_level=debug", ["log_level"], ways: [.detached]) { t in
                XCTAssertEqual(rmdir(t.fx.inMount("Data")), -1)
                try eventually("the failed rmdir is logged at debug level") { t.fx.log.contains("ENOTEMPTY") }
            },
            option("debug", ["debug"], ways: [.detached]) { t in
                XCTAssertEqual(try t.stat("pid"), String(t.fx.daemon), "stays in the foreground")
                XCTAssertEqual(rmdir(t.fx.inMount("Data")), -1)
                try eventually("logs at debug level") { t.fx.log.contains("ENOTEMPTY") }
            },
            // passed to FUSE and the kernel
            option("allow_other", ["allow_other"]) { t in XCTAssertTrue(t.superOptions().contains("allow_other")) },
            option("default_permissions", ["default_permissions"]) { t in
                XCTAssertTrue(t.superOptions().contains("default_permissions"))
            },
            option("auto_unmount", ["auto_unmount"]) { t in
                let watcher = try Spawn.run("/bin/sh", ["-c", "pgrep -af -- --auto-unmount-watch | grep -F -- '\(t.fx.mountpoint)'"])
                XCTAssertEqual(watcher.status, 0, "a watcher waits to take the mount away: \(watcher.output)")
            },
            option("nodev,nosuid,noexec", ["nodev", "nosuid", "noexec"]) { t in
                XCTAssertTrue(["nodev", "nosuid", "noexec"].allSatisfy(t.mountOptions().contains), "\(t.mountOptions())")
            },
            // through mount(8) too, which passes none of the three on (see MountCaller)
            option("dev,suid,exec", ["dev", "suid", "exec"]) { t in
                XCTAssertFalse(t.mountOptions().contains { ["nodev", "nosuid", "noexec"].contains($0) }, "\(t.mountOptions())")
            },
            option("noatime", ["noatime"]) { t in XCTAssertTrue(t.mountOptions().contains("noatime"), "\(t.mountOptions())") },
            option("noatime,atime", ["atime"]) { t in
                XCTAssertFalse(t.mountOptions().contains("noatime"), "\(t.mountOptions())")
            },
            option("nodiratime", ["nodiratime"]) { t in XCTAssertTrue(t.mountOptions().contains("nodiratime")) },
            option("noatime,relatime", ["relatime"]) { t in XCTAssertTrue(t.mountOptions().contains("relatime")) },
            // flags of the superblock: its options in the mount table
            option("sync", ["sync"]) { t in XCTAssertTrue(t.superOptions().contains("sync"), "\(t.superOptions())") },
            option("sync,async", ["async"]) { t in XCTAssertFalse(t.superOptions().contains("sync"), "\(t.superOptions())") },
            option("dirsync", ["dirsync"]) { t in XCTAssertTrue(t.superOptions().contains("dirsync"), "\(t.superOptions())") },
            option("fsname=flag-test", ["fsname"]) { t in
                XCTAssertEqual(MountTable.current().mount(at: t.fx.mountpoint)?.source, RawPath("flag-test"))
            },
        ]
    }

    /// Covered by tests of their own, which need a registry: `-o image=REF` and `store=DIR`
    /// (ImageSwitchTests.testImageOptionPullsOnceThenMountsFromTheStore).
    private let coveredElsewhere: Set<String> = ["image", "store"]

    func testTheTableNamesEveryFlagAndOption() throws {
        let dump = try proxybundle(["mount", "--experimental-dump-help"])
        XCTAssertEqual(dump.status, 0, dump.error)
        let json = try JSONSerialization.jsonObject(with: Data(dump.output.utf8)) as? [String: Any]
        let arguments = ((json?["command"] as? [String: Any])?["arguments"] as? [[String: Any]]) ?? []
        var wanted: Set<String> = []
        for argument in arguments {
            let names = (argument["names"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            guard let name = names.first, name != "h" else { continue }
            wanted.insert(name == "o" ? "-o" : "--" + name)
            guard name == "o" else { continue }  // the values of -o, not of --log-level
            let completion = (argument["completionKind"] as? [String: Any])?["list"] as? [String: Any]
            for value in completion?["values"] as? [String] ?? [] { wanted.insert(value.hasSuffix("=") ? String(value.dropLast()) : value) }
        }
        XCTAssertTrue(wanted.contains("--casefold") && wanted.contains("casefold") && wanted.count > 40, "\(wanted)")
        let covered = Set(table.flatMap(\.covers)).union(coveredElsewhere)
        XCTAssertEqual(wanted.subtracting(covered).sorted(), [], "flags and options without an entry")
    }

    func testEveryFlagAndOptionTakesEffectDetached() throws { try run(.detached) }
    func testEveryFlagAndOptionTakesEffectInTheForeground() throws { try run(.foreground) }
    func testEveryOptionTakesEffectThroughMountHelper() throws {
        let installed = try HelperInstall()
        defer { installed.remove() }
        try run(.helper)
    }

    /// An fstab line's explicit `dev,suid` mounts without `nodev`/`nosuid` (mount(8) passes
    /// neither word on; see MountCaller): a device node of the main bundle opens, as on kernel
    /// overlayfs (xfstests generic/306). Without them the mount stays `nosuid,nodev`.
    func testAnFstabLineWithDevAndSuidMountsWithout() throws {
        let installed = try HelperInstall()
        defer { installed.remove() }
        // /dev/null: major 1, minor 3
        XCTAssertEqual(mknod(fx.inMain("null"), S_IFCHR | 0o666, dev_t((1 << 8) | 3)), 0, "mknod: errno \(errno)")
        try fx.acceptMainBundleAsItIs()
        let transport = MountFixture.transportOptions.last.map { "," + $0 } ?? ""
        for (options, dev, suid) in [("dev,suid,", true, true), ("", false, false), ("suid,dev,nodev,", false, true)] {
            let fstab = fx.root + "/fstab"
            try Disk.write(fstab, "\(fx.main) \(fx.mountpoint) fuse.proxybundle \(options)substitution=\(fx.substitution)\(transport) 0 0\n")
            let result = try Spawn.run("/bin/mount", ["-T", fstab, fx.mountpoint])
            XCTAssertEqual(result.status, 0, result.error)
            fx.otherMounts.append(fx.mountpoint)
            try fx.waitForMount()
            let flags = mountOptions()
            XCTAssertEqual(!flags.contains("nodev"), dev, "fstab '\(options)': \(flags)")
            XCTAssertEqual(!flags.contains("nosuid"), suid, "fstab '\(options)': \(flags)")
            let fd = open(fx.inMount("null"), O_WRONLY)
            XCTAssertEqual(fd >= 0 ? 0 : errno, dev ? 0 : EACCES, "fstab '\(options)': open of the device node")
            if fd >= 0 { close(fd) }
            unmount(.helper, options)
        }
    }

    /// The systemd unit's command line, as systemd expands it from an instance's
    /// configuration (`${MAIN}` one word, `$OPTIONS` split at spaces, `%I` the mountpoint),
    /// mounts with every flag and option of OPTIONS.
    func testTheSystemdUnitPassesEveryFlag() throws {
        let unit = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path + "/docs/systemd/proxybundle@.service"
        let text = try Disk.read(unit)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ExecStart=") }) else {
            throw TestFailure("no ExecStart in \(unit)")
        }
        let variables = ["MAIN": fx.main, "SUBSTITUTION": fx.substitution,
                         "OPTIONS": "--patch \(patchA) --patch \(patchB) --casefold -o entry_timeout=5"]
        var words: [String] = []
        for word in line.dropFirst("ExecStart=".count).split(separator: " ").map(String.init) {
            if word.hasPrefix("$"), !word.hasPrefix("${"), let value = variables[String(word.dropFirst())] {
                words += value.split(separator: " ").map(String.init)
                continue
            }
            var expanded = word.replacingOccurrences(of: "/%I", with: fx.mountpoint)
            for (name, value) in variables { expanded = expanded.replacingOccurrences(of: "${\(name)}", with: value) }
            words.append(expanded)
        }
        XCTAssertEqual(words.first, "/usr/bin/proxybundle")
        try fx.startCommand(Array(words.dropFirst()) + MountFixture.transportOptions)
        XCTAssertEqual(try stat("casefold"), "on")
        XCTAssertEqual(try stat("entry_timeout"), "5")
        XCTAssertEqual(try stat("substitution"), fx.substitution)
        XCTAssertEqual(try patches(), [patchA, patchB])
        XCTAssertEqual(try names("data"), ["a.txt", "b.txt", "main.txt"])
    }

    /// Issue 49, item 3: the patches never go through the daemon's command line. At 1,000
    /// patches (`--patches-from`, detached and in the foreground, and `-o patches-from=`
    /// through mount(8)) `ps` shows a short line with none of their paths; `.stats`,
    /// `status` and `.layers` name them all.
    func testAThousandPatchesStayOffTheCommandLine() throws {
        let installed = try HelperInstall()
        defer { installed.remove() }
        var many: [String] = []
        for index in 0 ..< 1000 {
            let dir = fx.root + "/many/p\(index)"
            try Disk.mkdir(dir)
            many.append(dir)
        }
        try Disk.write(fx.root + "/many/p999/last.txt", "last")
        let file = fx.root + "/many.txt"
        try Disk.write(file, many.joined(separator: "\n") + "\n")
        let ways: [(Way, [String])] = [(.detached, ["--patches-from", file]), (.foreground, ["--patches-from", file]),
                                       (.helper, ["-o", "patches-from=\(file)"])]
        for (way, words) in ways {
            try mount(words, way, "\(way)")
            let pid = try stat("pid") ?? ""
            let cmdline = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))
            let shown = String(decoding: cmdline.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            XCTAssertLessThan(cmdline.count, 1024, "\(way): \(shown)")
            XCTAssertFalse(shown.contains("/many/p"), "\(way): \(shown)")
            XCTAssertEqual(try patches(), many, "\(way): .stats")
            let status = try proxybundle(["status", fx.mountpoint])
            XCTAssertEqual(status.output.split(separator: "\n").filter { $0.hasPrefix("  patch: ") }.count, 1000, "\(way): status")
            let layers = try Disk.read(fx.inMount(".layers")).split(separator: "\n").filter { $0.hasPrefix("patch ") }
            XCTAssertEqual(layers.count, 1000, "\(way): .layers")
            XCTAssertEqual(try Disk.read(fx.inMount("last.txt")), "last")
            unmount(way, "\(way)")
        }
    }

    /// Every option `remount` takes (as its `--experimental-dump-help` lists them), through
    /// `proxybundle remount` and through mount(8)'s `-o remount`, reaches the mount.
    func testEveryRemountOptionTakesEffect() throws {
        let installed = try HelperInstall()
        defer { installed.remove() }
        let flags = { (t: MountFlagTests) in Set(t.mountOptions()) }
        let table: [(option: String, check: (MountFlagTests) throws -> Void)] = [
            ("ro", { t in XCTAssertEqual(try t.stat("read_only"), "yes"); XCTAssertTrue(flags(t).contains("ro")) }),
            ("rw", { t in XCTAssertEqual(try t.stat("read_only"), "no"); XCTAssertTrue(flags(t).contains("rw")) }),
            ("entry_timeout=3", { t in XCTAssertEqual(try t.stat("entry_timeout"), "3") }),
            ("attr_timeout=4", { t in XCTAssertEqual(try t.stat("attr_timeout"), "4") }),
            ("negative_timeout=5", { t in XCTAssertEqual(try t.stat("negative_timeout"), "5") }),
            ("suid", { t in XCTAssertFalse(flags(t).contains("nosuid")) }),
            ("nosuid", { t in XCTAssertTrue(flags(t).contains("nosuid")) }),
            ("dev", { t in XCTAssertFalse(flags(t).contains("nodev")) }),
            ("nodev", { t in XCTAssertTrue(flags(t).contains("nodev")) }),
            ("noexec", { t in XCTAssertTrue(flags(t).contains("noexec")) }),
            ("exec", { t in XCTAssertFalse(flags(t).contains("noexec")) }),
        ]
        let dump = try proxybundle(["remount", "--experimental-dump-help"])
        let json = try JSONSerialization.jsonObject(with: Data(dump.output.utf8)) as? [String: Any]
        let arguments = ((json?["command"] as? [String: Any])?["arguments"] as? [[String: Any]]) ?? []
        let listed = arguments.compactMap { ($0["completionKind"] as? [String: Any])?["list"] as? [String: Any] }
            .flatMap { $0["values"] as? [String] ?? [] }
        XCTAssertFalse(listed.isEmpty, dump.output)
        for value in listed { XCTAssertTrue(table.contains { $0.option == value || $0.option.hasPrefix(value) && value.hasSuffix("=") }, value) }
        try fx.start()
        for (option, check) in table {
            for helper in [false, true] {
                let result = helper ? try Spawn.run("/bin/mount", ["-o", "remount," + option, fx.mountpoint])
                    : try proxybundle(["remount", fx.mountpoint, "-o", option])
                XCTAssertEqual(result.status, 0, "\(helper ? "mount -o remount," : "remount -o ")\(option): \(result.error)")
                do { try check(self) } catch { XCTFail("\(option): \(error)") }
            }
        }
    }

    /// `layers` hands each of its flags on: `--set DIR...`, `--patches-from`, `--set` alone,
    /// `--history`. (`--set-image`, `--rollback` and `--store` need a registry and are
    /// ImageSwitchTests'; `--registries.d` is SignedImageTests'; the registry and extraction options are the option groups `pull`
    /// has, which LayersImage passes to the same pull, and PullTests covers them.)
    func testEveryLayersFlagTakesEffect() throws {
        let coveredElsewhere: Set<String> = ["--set-image", "--rollback", "--store", "--tls-verify", "--policy", "--authfile",
                                             "--cert-dir", "--registries.d", "--max-size", "--max-entries", "--allow-special"]
        let dump = try proxybundle(["layers", "--experimental-dump-help"])
        let json = try JSONSerialization.jsonObject(with: Data(dump.output.utf8)) as? [String: Any]
        let arguments = ((json?["command"] as? [String: Any])?["arguments"] as? [[String: Any]]) ?? []
        let flags = Set(arguments.compactMap { ($0["names"] as? [[String: Any]])?.first?["name"] as? String }.filter { $0 != "h" }
            .map { "--" + $0 })
        XCTAssertEqual(flags.subtracting(coveredElsewhere.union(["--set", "--patches-from", "--history"])).sorted(), [])
        try fx.start()
        var result = try proxybundle(["layers", fx.mountpoint, "--set", patchA, patchB])
        XCTAssertEqual(result.status, 0, result.error)
        XCTAssertEqual(try patches(), [patchA, patchB])
        result = try proxybundle(["layers", fx.mountpoint, "--set", "--patches-from", list])
        XCTAssertEqual(result.status, 0, result.error)
        XCTAssertEqual(try patches(), [patchA, patchB])
        result = try proxybundle(["layers", fx.mountpoint, "--set", patchB, "--patches-from", fx.root + "/one.txt"])
        XCTAssertNotEqual(result.status, 0, "a list that cannot be read refuses the change")
        XCTAssertEqual(try patches(), [patchA, patchB])
        result = try proxybundle(["layers", fx.mountpoint, "--set"])
        XCTAssertEqual(result.status, 0, result.error)
        XCTAssertEqual(try patches(), [])
        result = try proxybundle(["layers", fx.mountpoint, "--history"])
        XCTAssertEqual(result.status, 0, result.error)
        XCTAssertEqual(result.output, "", "no image was ever set here")
    }

    private func run(_ way: Way) throws {
        for entry in table where entry.ways.contains(way) {
            let label = "\(way): \(entry.words.joined(separator: " "))"
            try mount(entry.words, way, label)
            do {
                try entry.check(self)
            } catch {
                XCTFail("\(label): \(error)")
            }
            unmount(way, label)
        }
    }

    private func usesSubstitution(_ words: [String]) -> Bool {
        !words.contains { $0 == "--substitution" || $0 == "--no-substitution" || $0.contains("substitution") }
    }

    private func mount(_ words: [String], _ way: Way, _ label: String) throws {
        let substitution = usesSubstitution(words) ? ["--substitution", fx.substitution] : []
        switch way {
        case .foreground:
            fx.usesSubstitution = false
            try fx.start(substitution + words)
        case .detached:
            let log = words.contains("--log-file") || words.contains("--syslog") ? [] : ["--log-file", fx.logPath]
            let transport = words.contains { $0.contains("transport=") } ? [] : MountFixture.transportOptions
            let given = ["mount", fx.main, fx.mountpoint] + substitution + words + log + transport
            if words.contains("--foreground") || words.last == "debug" {
                // the command stays: it is the daemon
                try fx.startCommand(given)
            } else {
                let result = try proxybundle(given)
                XCTAssertEqual(result.status, 0, "\(label): \(result.error)")
                fx.otherMounts.append(fx.mountpoint)
            }
        case .helper:
            precondition(words.first == "-o")
            let options = (usesSubstitution(words) ? "substitution=\(fx.substitution)," : "") + words[1]
                + (words[1].contains("transport=") ? "" : MountFixture.transportOptions.last.map { "," + $0 } ?? "")
            let result = try Spawn.run("/bin/mount", ["-t", "fuse.proxybundle", fx.main, fx.mountpoint, "-o", options])
            XCTAssertEqual(result.status, 0, "\(label): \(result.error)")
            fx.otherMounts.append(fx.mountpoint)
        }
        try fx.waitForMount()
    }

    private func unmount(_ way: Way, _ label: String) {
        if fx.isRunning {
            fx.stop()
        } else {
            let result = try? proxybundle(["unmount", fx.mountpoint])
            XCTAssertEqual(result?.status, 0, "\(label): \(result?.error ?? "")")
            Unmounter.force(fx.mountpoint)
        }
        fx.otherMounts.removeAll()
    }
}
