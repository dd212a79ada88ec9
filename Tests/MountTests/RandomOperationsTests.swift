import CSyscalls
import ProxyBundleCore
import Foundation
import XCTest

/// Seeded random sequences of changes, applied with plain syscalls to a proxybundle mount and to
/// a kernel overlayfs mount of the same main bundle, both starting with an empty upper layer.
/// After every step each call's result (return value or errno) must be the same on both, and so
/// must the visible trees (walked and compared as in OverlayDifferentialTests). The substitution,
/// applied as an OCI layer over the layers below (Support/OCILayers.swift: with modes, owners,
/// times, xattrs and its own hard links), must make the mount's tree, compared the same way.
///
/// Operations (RandomPlanner): open(O_CREAT|O_EXCL), pwrite at an offset (sometimes far past the
/// end), truncate, rename (files and directories, with main-bundle content or not, across
/// directories, onto existing names; sometimes RENAME_NOREPLACE or RENAME_EXCHANGE), unlink,
/// rmdir, mkdir, link, symlink, chmod (set-id and sticky bits included), lchown, utimensat. Paths
/// are existing ones, ones that existed earlier, ones that never did, and new names (mostly
/// names the main bundle also uses) below directories, files and symlinks (ENOTDIR). Each call
/// is made on proxybundle first, then on the kernel's overlay.
///
/// The kernel's overlay is the oracle. It is mounted read-write with
/// `redirect_dir=on,index=off,metacopy=off`: with `redirect_dir=on` it renames directories that
/// have lower content (proxybundle materializes them, see Rename.swift), so both implement the
/// same POSIX behaviour; `index=off` and `metacopy=off` keep copy-up a plain full copy.
///
/// Compared as OverlayTree.differences does (type, mode, owner, size, content, symlink target and
/// what it leads to, xattrs, d_type, st_nlink of non-directories, groups of hard links), except:
/// - mtimes at or after the start of the run are shown as `(recent)`: two calls on two file
///   systems never happen in the same nanosecond. Times from the main bundle and from
///   utimensat steps are fixed in 2020 and compared exactly, so a copy-up that loses a time, or
///   a directory whose mtime is not updated by a change (or is updated by a mere copy-up, which
///   overlayfs avoids by restoring the parent's times), still shows;
/// - inode numbers are not compared except as hard-link groups; `st_nlink` and `st_size` of
///   directories, atime and ctime are not compared (OverlayTree leaves them out already);
/// - the root's control files are not listed by the mount, so the walk does not see them.
///
/// Differences once accepted, now failures by default: proxybundle used to answer `EXDEV` to a
/// rename involving a directory with main-bundle content (as overlayfs without redirect_dir
/// does) and `EINVAL` to `RENAME_EXCHANGE`; since commit e263265 it renames and exchanges such
/// directories (materializing them), so either answer would be a regression. With
/// `RANDOM_OPS_LENIENT=1` they are accepted again, counted and printed: an `EXDEV` rename is not
/// made on the kernel's side, and an exchange the kernel made is undone by exchanging again
/// (an exchange is its own inverse). The trees must still agree: the refused call must have
/// changed nothing.
///
/// On the first mismatch of a seed, that seed stops and the test fails with the seed, the step,
/// the main bundle's tree and every operation up to that step. Environment (all optional):
/// `RANDOM_OPS_SEEDS=1,0x2a` and `RANDOM_OPS_STEPS=300` to reproduce or widen a run;
/// `RANDOM_OPS_MINIMIZE=1` to also shrink a failing sequence (replays on fresh mounts; slow);
/// `RANDOM_OPS_IGNORE_DIRECTORY_MTIMES=1`, and `RANDOM_OPS_IGNORE=REGEX` (tree difference lines
/// that match are dropped), and `RANDOM_OPS_SKIP=link,chown` (kinds of operations never drawn),
/// to look past known differences for others.
final class RandomOperationsTests: XCTestCase {
    static let defaultSeeds: [UInt64] = [1, 2, 3, 0x5eed_0004, 0xfeed_f00d]
    static let defaultSteps = 300

    func testRandomOperationSequencesMatchKernelOverlayfs() throws {
        try runSeeds(RandomOperationsTests.defaultSeeds)
    }

    /// The same while the kernel keeps dropping cached dentries and inodes (as under memory
    /// pressure), so nodes are forgotten and looked up again between and during steps: hard
    /// links found again by separate names must stay one file, copied-up files must keep their
    /// inode numbers, and a node must stay reachable through its other names.
    /// Each seed's mount must show nodes the kernel forgot (`forgotten_nodes`) before it ends.
    func testRandomOperationsWhileTheKernelForgetsNodes() throws {
        let stop = Locked(false, rank: .local)
        let drops = Locked((done: 0, failed: Set<String>()), rank: .local)
        let evictor = Thread {
            while !stop.withLock({ $0 }) {
                let error = RandomOperationsTests.dropKernelCaches()
                drops.withLock {
                    if error == 0 { $0.done += 1 } else { $0.failed.insert(String(cString: strerror(error))) }
                }
                usleep(20_000)
            }
        }
        evictor.start()
        defer { stop.withLock { $0 = true } }
        try runSeeds([1, 2, 3, 0xfeed_f00d], forgetting: true)
        let (done, failed) = drops.withLock { ($0.done, $0.failed) }
        XCTAssertEqual(failed, [], "writes to drop_caches failed")
        XCTAssertGreaterThan(done, 0, "caches were dropped")
    }

    /// Drops the kernel's unused dentries and inodes; 0 or the errno.
    static func dropKernelCaches() -> Int32 {
        let fd = open("/proc/sys/vm/drop_caches", O_WRONLY)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return write(fd, "2", 1) == 1 ? 0 : errno
    }

    /// The same with two patches between the substitution and the main bundle (generated from
    /// the same names, with whiteouts and opaque directories): copy-ups from either patch,
    /// whiteouts where a patch or the main bundle still shows a name.
    func testRandomOperationsOverStackedPatches() throws {
        try runSeeds([1, 2, 0x57ac_0003], patches: 2)
    }

    /// `forgetting`: the kernel is dropping its caches meanwhile, and each seed's mount must
    /// show nodes it forgot.
    private func runSeeds(_ defaultSeeds: [UInt64], patches: Int = 0, forgetting: Bool = false) throws {
        let environment = ProcessInfo.processInfo.environment
        let seeds = environment["RANDOM_OPS_SEEDS"].map(RandomOperationsTests.parseSeeds) ?? defaultSeeds
        let steps = environment["RANDOM_OPS_STEPS"].flatMap { Int($0) } ?? RandomOperationsTests.defaultSteps
        let strict = environment["RANDOM_OPS_LENIENT"] != "1"
        let minimize = environment["RANDOM_OPS_MINIMIZE"] == "1"
        let relaxed = ["RANDOM_OPS_LENIENT", "RANDOM_OPS_IGNORE_DIRECTORY_MTIMES", "RANDOM_OPS_IGNORE", "RANDOM_OPS_SKIP"]
            .filter { environment[$0] != nil }
        if !relaxed.isEmpty { print("random operations: relaxed by " + relaxed.joined(separator: ", ")) }
        let started = Date()
        var failures: [String] = []
        for seed in seeds {
            let run = try RandomRun(seed: seed, patches: patches, strict: strict, testName: name,
                                    ignoreDirectoryMtimes: environment["RANDOM_OPS_IGNORE_DIRECTORY_MTIMES"] == "1",
                                    ignorePattern: environment["RANDOM_OPS_IGNORE"],
                                    skipped: Set((environment["RANDOM_OPS_SKIP"] ?? "").split(separator: ",").map(String.init)))
            let outcome = try run.generated(steps: steps, forgetting: forgetting)
            if forgetting {
                XCTAssertGreaterThan(outcome.forgottenNodes ?? 0, 0, "seed 0x\(String(seed, radix: 16)): the kernel forgot no node")
            }
            var summary = "seed 0x\(String(seed, radix: 16)): \(outcome.steps.count) step(s)"
            if !outcome.accepted.isEmpty {
                summary += ", accepted differences: "
                    + Dictionary(grouping: outcome.accepted, by: { $0 }).map { "\($0.value.count)x \($0.key)" }.sorted().joined(separator: "; ")
            }
            if let failure = outcome.failure {
                summary += ", MISMATCH at step \(outcome.steps.count)"
                var text = run.report(outcome, failure: failure)
                if minimize, let shrunk = try run.minimize(outcome.steps.map(\.op), failure: failure) {
                    text += "\n\nminimized (\(shrunk.steps.count) step(s), replayed on a fresh mount):\n"
                        + run.report(shrunk, failure: shrunk.failure!)
                }
                failures.append(text)
            }
            print(summary)
        }
        print("random operations: \(seeds.count) seed(s) x \(steps) step(s) in "
              + String(format: "%.1f", Date().timeIntervalSince(started)) + " s")
        XCTAssertTrue(failures.isEmpty, "\(failures.count) of \(seeds.count) seed(s) found a difference "
                      + "between proxybundle and kernel overlayfs:\n\n" + failures.joined(separator: "\n\n"))
    }

    /// The comparison must notice a difference: the same operation made on one side only.
    func testComparisonNoticesAChangeMadeOnOneSideOnly() throws {
        let session = try RandomSession(seed: 7, testName: name)
        defer { session.close() }
        let op = RandomOp.mkdir("only-on-one-side", 0o755)
        _ = op.apply(in: session.fx.mountpoint)
        let differences = try session.differences()
        XCTAssertTrue(differences.contains("only in proxybundle: only-on-one-side (directory)"), "\(differences)")
    }

    static func parseSeeds(_ text: String) -> [UInt64] {
        text.split(separator: ",").compactMap { part in
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("0x") ? UInt64(trimmed.dropFirst(2), radix: 16) : UInt64(trimmed)
        }
    }
}

// MARK: - operations

private enum RandomOp: CustomStringConvertible {
    case create(String, mode_t)
    case write(String, offset: Int, length: Int, seed: UInt64)
    case truncate(String, Int)
    case rename(String, String, flags: UInt32)
    case unlink(String)
    case rmdir(String)
    case mkdir(String, mode_t)
    case link(String, String)
    case symlink(target: String, String)
    case chmod(String, mode_t)
    case chown(String, uid_t, gid_t)
    case utimens(String, Int, Int, noFollow: Bool)

    var kind: String {
        switch self {
        case .create: return "create"
        case .write: return "write"
        case .truncate: return "truncate"
        case .rename(_, _, let flags):
            return flags == 0 ? "rename" : flags == pb_RENAME_NOREPLACE ? "rename-noreplace" : "rename-exchange"
        case .unlink: return "unlink"
        case .rmdir: return "rmdir"
        case .mkdir: return "mkdir"
        case .link: return "link"
        case .symlink: return "symlink"
        case .chmod: return "chmod"
        case .chown: return "chown"
        case .utimens: return "utimens"
        }
    }

    var description: String {
        func q(_ s: String) -> String { "\"" + s + "\"" }
        func octal(_ m: mode_t) -> String { "0" + String(m, radix: 8) }
        switch self {
        case let .create(path, mode): return "open(\(q(path)), O_WRONLY|O_CREAT|O_EXCL, \(octal(mode)))"
        case let .write(path, offset, length, _): return "pwrite(open(\(q(path)), O_WRONLY), \(length) bytes, offset \(offset))"
        case let .truncate(path, size): return "truncate(\(q(path)), \(size))"
        case let .rename(from, to, flags):
            if flags == 0 { return "rename(\(q(from)), \(q(to)))" }
            return "renameat2(\(q(from)), \(q(to)), \(flags == pb_RENAME_NOREPLACE ? "RENAME_NOREPLACE" : "RENAME_EXCHANGE"))"
        case let .unlink(path): return "unlink(\(q(path)))"
        case let .rmdir(path): return "rmdir(\(q(path)))"
        case let .mkdir(path, mode): return "mkdir(\(q(path)), \(octal(mode)))"
        case let .link(from, to): return "link(\(q(from)), \(q(to)))"
        case let .symlink(target, path): return "symlink(\(q(target)), \(q(path)))"
        case let .chmod(path, mode): return "chmod(\(q(path)), \(octal(mode)))"
        case let .chown(path, uid, gid): return "lchown(\(q(path)), \(uid), \(gid))"
        case let .utimens(path, seconds, nanoseconds, noFollow):
            return "utimensat(\(q(path)), \(seconds).\(String(format: "%09d", nanoseconds))\(noFollow ? ", AT_SYMLINK_NOFOLLOW" : ""))"
        }
    }

    /// The paths the operation names (for deciding whether a directory is involved).
    var paths: [String] {
        switch self {
        case let .rename(a, b, _), let .link(a, b): return [a, b]
        case let .create(p, _), let .write(p, _, _, _), let .truncate(p, _), let .unlink(p), let .rmdir(p),
             let .mkdir(p, _), let .symlink(_, p), let .chmod(p, _), let .chown(p, _, _), let .utimens(p, _, _, _):
            return [p]
        }
    }

    /// Makes the call below `root`; the result as text: "0", a byte count, or an errno name.
    func apply(in root: String) -> String {
        func at(_ relative: String) -> String { root + "/" + relative }
        func check(_ result: Int32) -> String { result == 0 ? "0" : result < 0 ? errnoName(errno) : "\(result)" }
        switch self {
        case let .create(path, mode):
            let fd = open(at(path), O_WRONLY | O_CREAT | O_EXCL | pb_O_CLOEXEC, mode)
            guard fd >= 0 else { return errnoName(errno) }
            close(fd)
            return "0"
        case let .write(path, offset, length, seed):
            let fd = open(at(path), O_WRONLY | pb_O_CLOEXEC)
            guard fd >= 0 else { return "open " + errnoName(errno) }
            defer { close(fd) }
            let data = RandomOp.data(length, seed: seed)
            let written = pwrite(fd, data, length, off_t(offset))
            return written < 0 ? "pwrite " + errnoName(errno) : "\(written)"
        case let .truncate(path, size): return check(Glibc.truncate(at(path), off_t(size)))
        case let .rename(from, to, flags): return check(pb_renameat2(AT_FDCWD, at(from), AT_FDCWD, at(to), flags))
        case let .unlink(path): return check(Glibc.unlink(at(path)))
        case let .rmdir(path): return check(Glibc.rmdir(at(path)))
        case let .mkdir(path, mode): return check(Glibc.mkdir(at(path), mode))
        case let .link(from, to): return check(Glibc.link(at(from), at(to)))
        case let .symlink(target, path): return check(Glibc.symlink(target, at(path)))
        case let .chmod(path, mode): return check(Glibc.chmod(at(path), mode))
        case let .chown(path, uid, gid): return check(Glibc.lchown(at(path), uid, gid))
        case let .utimens(path, seconds, nanoseconds, noFollow):
            var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
            return check(utimensat(AT_FDCWD, at(path), &times, noFollow ? pb_AT_SYMLINK_NOFOLLOW : 0))
        }
    }

    static func data(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }
}

private func errnoName(_ code: Int32) -> String {
    let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EACCES: "EACCES", EBUSY: "EBUSY",
        EEXIST: "EEXIST", EXDEV: "EXDEV", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", EINVAL: "EINVAL",
        EFBIG: "EFBIG", ENOSPC: "ENOSPC", EROFS: "EROFS", EMLINK: "EMLINK", ENAMETOOLONG: "ENAMETOOLONG",
        ENOTEMPTY: "ENOTEMPTY", ELOOP: "ELOOP", ENOSYS: "ENOSYS", EOPNOTSUPP: "EOPNOTSUPP", ESTALE: "ESTALE",
        ENOTCONN: "ENOTCONN", ETXTBSY: "ETXTBSY",
    ]
    return names[code] ?? "errno \(code)"
}

// MARK: - the main bundle

/// Names shared by the main bundle and the operations, so that new entries land on names the
/// main bundle has (whited out or not).
private enum RandomNames {
    static let pool = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    /// Relative and without "..": a symlink leads somewhere inside the mount wherever it moves
    /// (an operation through a symlink must never reach outside the mount).
    static let symlinkTargets = ["alpha", "beta/gamma", "gamma", "missing", ".", "delta/eps", "zeta"]
    static let modes: [mode_t] = [0o644, 0o644, 0o600, 0o755, 0o444, 0o700, 0o640]

    /// A main bundle from `seed`: directories up to three levels deep, files with content and
    /// various modes (one 0444, one with a user xattr), symlinks; fixed times with nanoseconds.
    static func buildMain(_ main: String, seed: UInt64) throws -> [String] {
        var rng = OverlayScenario.Generator(seed: seed ^ 0x6d61_696e_6d61_696e)
        var directories = [""]
        var paths: [String] = []
        func child(_ parent: String, _ name: String) -> String { parent.isEmpty ? name : parent + "/" + name }
        for _ in 0..<8 {
            let parent = directories[rng.below(directories.count)]
            let path = child(parent, pool[rng.below(pool.count)])
            guard parent.split(separator: "/").count < 3, !paths.contains(path) else { continue }
            try Disk.mkdir(main + "/" + path, mode: rng.chance(15) ? 0o700 : 0o755)
            directories.append(path)
            paths.append(path)
        }
        var files: [String] = []
        for _ in 0..<16 {
            let path = child(directories[rng.below(directories.count)], pool[rng.below(pool.count)])
            guard !paths.contains(path) else { continue }
            try OverlayScenario.bytes(main + "/" + path, count: rng.chance(10) ? 0 : rng.below(5000), seed: rng.next())
            try OverlayScenario.setMode(main + "/" + path, files.isEmpty ? 0o444 : modes[rng.below(modes.count)])
            files.append(path)
            paths.append(path)
        }
        if let first = files.last {
            guard setxattr(main + "/" + first, "user.origin", "main", 4, 0) == 0 else {
                throw TestFailure("setxattr \(first): errno \(errno)")
            }
        }
        for _ in 0..<3 {
            let path = child(directories[rng.below(directories.count)], pool[rng.below(pool.count)])
            guard !paths.contains(path) else { continue }
            try Disk.symlink(main + "/" + path, to: symlinkTargets[rng.below(symlinkTargets.count)])
            paths.append(path)
        }
        // deepest first, so that setting a child's time does not move its parent's again
        for path in (paths + [""]).sorted(by: { $0.split(separator: "/").count > $1.split(separator: "/").count }) {
            try OverlayScenario.setTime(path.isEmpty ? main : main + "/" + path,
                                        OverlayScenario.baseTime + rng.below(1_000_000), rng.below(1_000_000_000))
        }
        return paths.sorted()
    }

    /// Patch `index` over a main bundle from `seed`: a tree of the same names (files, directories,
    /// symlinks), whiteouts of names it does not have itself, and sometimes an opaque directory.
    static func buildPatch(_ patch: String, seed: UInt64, index: Int) throws {
        let layerSeed = seed ^ (0x7061_7463_6800_0000 &+ UInt64(index + 1))
        try Disk.mkdir(patch)
        let paths = try buildMain(patch, seed: layerSeed)
        var rng = OverlayScenario.Generator(seed: layerSeed)
        let directories = [""] + paths.filter { Disk.lstat(patch + "/" + $0).map { ($0.st_mode & S_IFMT) == S_IFDIR } ?? false }
        for _ in 0..<5 {
            let directory = directories[rng.below(directories.count)]
            let name = pool[rng.below(pool.count)]
            let dir = directory.isEmpty ? patch : patch + "/" + directory
            if Disk.lstat(dir + "/" + name) == nil { try Disk.whiteout(dir, name) }
        }
        if directories.count > 1 && rng.chance(50) {
            try Disk.opaque(patch + "/" + directories[1 + rng.below(directories.count - 1)])
        }
        // the whiteouts' directories keep the times the tree was given
        for directory in directories.reversed() {
            try OverlayScenario.setTime(directory.isEmpty ? patch : patch + "/" + directory,
                                        OverlayScenario.baseTime + rng.below(1_000_000), rng.below(1_000_000_000))
        }
    }

    /// One line per entry of the main bundle, to reproduce a failure by hand.
    static func describe(_ main: String) -> String {
        guard let entries = try? OverlayTree.walk(main) else { return "(cannot walk the main bundle)" }
        return entries.keys.sorted().filter { !$0.isEmpty }.map { path in
            let e = entries[path]!
            var line = "  " + path + " (" + e.type + " 0" + String(e.mode, radix: 8)
            if e.type == "file" { line += ", \(e.size) bytes" }
            if let target = e.target { line += " -> " + target }
            if !e.xattrs.isEmpty { line += ", " + e.xattrs.joined(separator: " ") }
            return line + ")"
        }.joined(separator: "\n")
    }
}

// MARK: - one pair of mounts

/// A fresh main bundle, a proxybundle mount with an empty substitution, and a read-write
/// kernel overlay of the same main bundle with an empty upper directory.
private final class RandomSession {
    let fx: MountFixture
    let kernel: String
    /// The read-only layers, the main bundle first, then the patches upwards.
    private(set) var lowers: [String] = []
    /// mtimes from this second on are "now", whichever side made them
    let since: Int

    init(seed: UInt64, patches: Int = 0, testName: String) throws {
        since = Int(Date().timeIntervalSince1970) - 2
        fx = try MountFixture(testName + "-" + String(seed, radix: 16))
        kernel = fx.root + "/kernel"
        do {
            _ = try RandomNames.buildMain(fx.main, seed: seed)
            let patchDirectories = (0..<patches).map { fx.root + "/patch\($0 + 1)" }
            lowers = [fx.main] + patchDirectories.reversed()
            for (index, patch) in patchDirectories.enumerated() {
                try RandomNames.buildPatch(patch, seed: seed, index: index)
            }
            let lowers = try KernelOverlay.convertedStack(patchDirectories + [fx.main], scratch: fx.root + "/converted")
            let upper = fx.root + "/kernel-upper"
            try Disk.mkdir(upper)
            // the merged root shows the upper root's attributes: the same on both sides
            guard let root = Disk.lstat(fx.main) else { throw TestFailure("lstat \(fx.main): errno \(errno)") }
            for dir in [upper, fx.substitution] {
                try OverlayScenario.setMode(dir, root.st_mode & 0o7777)
                try OverlayScenario.setTime(dir, root.st_mtim.tv_sec, root.st_mtim.tv_nsec)
            }
            try KernelOverlay.mountWritable(lowers: lowers, at: kernel, upper: upper,
                                            extra: ",redirect_dir=on,index=off,metacopy=off")
            try fx.start(patches: patchDirectories)
        } catch {
            close()
            throw error
        }
    }

    func close() {
        Unmounter.force(kernel)
        fx.tearDown()
    }

    /// `forgotten_nodes` once above 0, while the kernel's caches are dropped.
    func forgottenNodes() throws -> Int {
        try eventually("the kernel forgets nodes") { () -> Int? in
            let forgotten = try fx.figure("forgotten_nodes")
            return forgotten > 0 ? forgotten : nil
        }
    }

    func walk(_ root: String) throws -> [String: OverlayTree.Entry] {
        try OverlayTree.walk(root, recentFrom: since)
    }

    func differences() throws -> [String] {
        OverlayTree.differences(try walk(fx.mountpoint), try walk(kernel), leftName: "proxybundle", rightName: "overlayfs")
    }

    /// Where the substitution, applied as an OCI layer over the layers below, does not make
    /// what the mount shows.
    func ociDifferences() throws -> [String] {
        try OCILayers.differences(lowers + [fx.substitution], shown: fx.mountpoint, scratch: fx.root + "/oci-applied")
    }
}

// MARK: - running sequences

private struct RandomStep {
    var op: RandomOp
    var proxy: String
    var kernel: String
    var note: String?
}

private struct RandomOutcome {
    var steps: [RandomStep] = []
    var accepted: [String] = []
    var failure: String?
    /// `forgotten_nodes` at the end, when asked for.
    var forgottenNodes: Int?
}

private struct RandomRun {
    let seed: UInt64
    /// Patches between the substitution and the main bundle.
    let patches: Int
    let strict: Bool
    let testName: String
    let main: String
    let ignoreDirectoryMtimes: Bool
    let ignorePattern: String?
    let skipped: Set<String>

    init(seed: UInt64, patches: Int = 0, strict: Bool, testName: String, ignoreDirectoryMtimes: Bool = false,
         ignorePattern: String? = nil, skipped: Set<String> = []) throws {
        self.skipped = skipped
        self.seed = seed
        self.patches = patches
        self.ignoreDirectoryMtimes = ignoreDirectoryMtimes
        self.ignorePattern = ignorePattern
        self.strict = strict
        self.testName = testName
        // the main bundle as text, for the report (built once more in a scratch directory)
        let scratch = FileManager.default.temporaryDirectory.path + "/pb-random-main-\(getpid())-\(seed)"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try? FileManager.default.removeItem(atPath: scratch)
        try Disk.mkdir(scratch)
        _ = try RandomNames.buildMain(scratch, seed: seed)
        var text = RandomNames.describe(scratch)
        for index in 0..<patches {
            let patch = scratch + "-patch\(index + 1)"
            defer { try? FileManager.default.removeItem(atPath: patch) }
            try? FileManager.default.removeItem(atPath: patch)
            try RandomNames.buildPatch(patch, seed: seed, index: index)
            text += "\n  patch \(index + 1) (the first is the highest):\n" + RandomNames.describe(patch)
        }
        main = text
    }

    /// Operations drawn from the seed, each chosen from the tree as it is after the last one;
    /// with `forgetting`, then waits (up to 10 s) for the kernel to have forgotten nodes.
    func generated(steps: Int, forgetting: Bool = false) throws -> RandomOutcome {
        let session = try RandomSession(seed: seed, patches: patches, testName: testName)
        defer { session.close() }
        var planner = RandomPlanner(seed: seed, skipped: skipped)
        var outcome = RandomOutcome()
        var tree = try session.walk(session.kernel)
        for _ in 0..<steps {
            let op = planner.next(tree)
            if let failure = try perform(op, session, &outcome, &tree) {
                outcome.failure = failure
                break
            }
        }
        if forgetting { outcome.forgottenNodes = try session.forgottenNodes() }
        return outcome
    }

    /// Replays a fixed list of operations on fresh mounts; stops at the first mismatch.
    func replay(_ ops: [RandomOp]) throws -> RandomOutcome {
        let session = try RandomSession(seed: seed, patches: patches, testName: testName)
        defer { session.close() }
        var outcome = RandomOutcome()
        var tree = try session.walk(session.kernel)
        for op in ops {
            if let failure = try perform(op, session, &outcome, &tree) {
                outcome.failure = failure
                break
            }
        }
        return outcome
    }

    /// One step on both sides, then both trees; the mismatch as text, or nil.
    private func perform(_ op: RandomOp, _ session: RandomSession, _ outcome: inout RandomOutcome,
                         _ tree: inout [String: OverlayTree.Entry]) throws -> String? {
        let involvesDirectory = op.paths.contains { tree[$0]?.type == "directory" }
        let proxy = op.apply(in: session.fx.mountpoint)
        var note: String? = nil
        var kernel: String
        if !strict, proxy == "EXDEV", involvesDirectory, case .rename = op {
            note = "proxybundle EXDEV for a directory rename (former limitation)"
            kernel = "(not called)"
        } else {
            kernel = op.apply(in: session.kernel)
            if !strict, proxy == "EINVAL", kernel == "0", case let .rename(_, _, flags) = op, flags == pb_RENAME_EXCHANGE {
                // an exchange is its own inverse: undone on the kernel's side
                note = "proxybundle EINVAL for RENAME_EXCHANGE (former limitation)"
                kernel = "0, undone: " + op.apply(in: session.kernel)
            }
        }
        outcome.steps.append(RandomStep(op: op, proxy: proxy, kernel: kernel, note: note))
        if let note { outcome.accepted.append(note) }
        if note == nil && proxy != kernel {
            return "results differ: proxybundle=\(proxy) overlayfs=\(kernel)"
        }
        let ours: [String: OverlayTree.Entry]
        do { ours = try session.walk(session.fx.mountpoint) } catch { return "walking proxybundle's mount failed: \(error)" }
        tree = try session.walk(session.kernel)
        var differences = OverlayTree.differences(ours, tree, leftName: "proxybundle", rightName: "overlayfs")
        if ignoreDirectoryMtimes {
            differences.removeAll { line in
                guard let range = line.range(of: ": mtime ") else { return false }
                let path = String(line[..<range.lowerBound])
                return (path == "(root)" ? tree[""] : tree[path])?.type == "directory"
            }
        }
        if let ignorePattern {
            differences.removeAll { $0.range(of: ignorePattern, options: .regularExpression) != nil }
        }
        guard differences.isEmpty else {
            let shown = differences.prefix(40)
            return "trees differ after the step:\n    " + shown.joined(separator: "\n    ")
                + (differences.count > shown.count ? "\n    ... (\(differences.count) in all)" : "")
        }
        // the substitution stays a portable patch: as an OCI layer it means what the mount shows
        let oci = try session.ociDifferences()
        guard oci.isEmpty else {
            return "the substitution as an OCI layer differs from the mount after the step:\n    "
                + oci.prefix(40).joined(separator: "\n    ")
        }
        return nil
    }

    func report(_ outcome: RandomOutcome, failure: String) -> String {
        let last = outcome.steps.last
        var lines = ["seed 0x\(String(seed, radix: 16)), step \(outcome.steps.count): \(last.map { $0.op.description } ?? "-")",
                     "  " + failure,
                     "  main bundle (replay: RANDOM_OPS_SEEDS=0x\(String(seed, radix: 16)) RANDOM_OPS_STEPS=\(outcome.steps.count)):",
                     main,
                     "  operations (result on proxybundle / on overlayfs):"]
        for (index, step) in outcome.steps.enumerated() {
            let result = step.proxy == step.kernel ? step.proxy : "\(step.proxy) / \(step.kernel)"
            lines.append("  \(index + 1). \(step.op) -> \(result)" + (step.note.map { "  [accepted: \($0)]" } ?? ""))
        }
        return lines.joined(separator: "\n")
    }

    /// Greedy delta debugging: drops chunks of operations as long as a replay still fails the
    /// same way (same kind of operation at the failing step, same kind of mismatch).
    func minimize(_ ops: [RandomOp], failure: String) throws -> RandomOutcome? {
        func signature(_ outcome: RandomOutcome) -> String? {
            guard let failure = outcome.failure, let last = outcome.steps.last else { return nil }
            return last.op.kind + ":" + (failure.hasPrefix("results") ? "results" : "trees")
        }
        guard let lastKind = ops.last?.kind else { return nil }
        let wanted = lastKind + ":" + (failure.hasPrefix("results") ? "results" : "trees")
        var current = ops
        var best: RandomOutcome? = nil
        var chunk = max(1, current.count / 2)
        var replays = 0
        while replays < 400 {
            var index = 0
            var removedAny = false
            while index < current.count - 1 && replays < 400 {  // the failing step itself stays
                let end = min(index + chunk, current.count - 1)
                let candidate = Array(current[..<index] + current[end...])
                replays += 1
                let outcome = try replay(candidate)
                if signature(outcome) == wanted {
                    current = outcome.steps.map(\.op)
                    best = outcome
                    removedAny = true
                } else {
                    index += chunk
                }
            }
            if chunk == 1 && !removedAny { break }
            chunk = max(1, chunk / 2)
        }
        if let best { return best }
        return try replay(current)
    }
}

// MARK: - choosing operations

/// Picks each operation from the tree as it is now (the kernel's walk, which equals
/// proxybundle's while they agree): existing paths, paths that existed once, paths that never
/// did, and new names (often names the main bundle has) in existing directories.
private struct RandomPlanner {
    var rng: OverlayScenario.Generator
    var history: Set<String> = []
    let skipped: Set<String>

    init(seed: UInt64, skipped: Set<String> = []) {
        rng = OverlayScenario.Generator(seed: seed)
        self.skipped = skipped
    }

    mutating func next(_ tree: [String: OverlayTree.Entry]) -> RandomOp {
        while true {
            let op = draw(tree)
            if !skipped.contains(op.kind) && !skipped.contains(op.kind.split(separator: "-").first.map(String.init) ?? "") {
                return op
            }
        }
    }

    private mutating func draw(_ tree: [String: OverlayTree.Entry]) -> RandomOp {
        let paths = tree.keys.filter { !$0.isEmpty && !$0.hasPrefix("duplicate ") }.sorted()
        history.formUnion(paths)
        let directories = paths.filter { tree[$0]?.type == "directory" }
        let files = paths.filter { tree[$0]?.type == "file" }
        let pastPaths = history.sorted()

        func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[rng.below(items.count)] }
        func name() -> String { RandomNames.pool[rng.below(RandomNames.pool.count)] }
        func existing(preferring preferred: [String] = []) -> String {
            let roll = rng.below(100)
            if roll < 6, let past = pick(pastPaths) { return past }
            if roll < 9 { return "nowhere/" + name() }
            if roll < 55, let choice = pick(preferred) { return choice }
            return pick(paths) ?? name()
        }
        func fresh() -> String {
            let roll = rng.below(100)
            let parent: String
            if roll < 86 { parent = pick([""] + directories) ?? "" }
            else if roll < 94 { parent = pick(paths.filter { tree[$0]?.type != "directory" }) ?? "" }
            else { parent = "nowhere" }
            return parent.isEmpty ? name() : parent + "/" + name()
        }
        func mode() -> mode_t {
            rng.chance(8) ? [0o4755, 0o2755, 0o1777, 0o000][rng.below(4)] : RandomNames.modes[rng.below(RandomNames.modes.count)]
        }

        let roll = rng.below(120)
        switch roll {
        case 0..<13:
            return .create(rng.chance(75) ? fresh() : existing(), mode())
        case 13..<27:
            let path = existing(preferring: files)
            let size = tree[path].map { max(0, $0.size) } ?? 0
            let offset = rng.chance(10) ? 60_000 + rng.below(20_000) : rng.below(size + 200)
            return .write(path, offset: offset, length: 1 + rng.below(rng.chance(20) ? 20_000 : 3000), seed: rng.next())
        case 27..<34:
            let path = existing(preferring: files)
            let size = tree[path].map { max(0, $0.size) } ?? 0
            return .truncate(path, [0, rng.below(size + 1), size + rng.below(10_000)][rng.below(3)])
        case 34..<55:
            let from = existing(preferring: rng.chance(50) ? directories : files)
            let to = rng.chance(45) ? existing(preferring: tree[from]?.type == "directory" ? directories : files) : fresh()
            let flags: UInt32 = rng.chance(80) ? 0 : rng.chance(50) ? pb_RENAME_NOREPLACE : pb_RENAME_EXCHANGE
            return .rename(from, to, flags: flags)
        case 55..<65:
            return .unlink(existing(preferring: paths.filter { tree[$0]?.type != "directory" }))
        case 65..<73:
            // empty directories first, so that removals succeed often enough
            let empty = directories.filter { dir in !paths.contains { $0.hasPrefix(dir + "/") } }
            return .rmdir(existing(preferring: rng.chance(60) ? empty : directories))
        case 73..<84:
            return .mkdir(rng.chance(85) ? fresh() : existing(), mode() | 0o700)
        case 84..<91:
            return .link(existing(preferring: files), rng.chance(85) ? fresh() : existing())
        case 91..<97:
            return .symlink(target: RandomNames.symlinkTargets[rng.below(RandomNames.symlinkTargets.count)],
                            rng.chance(85) ? fresh() : existing())
        case 97..<106:
            return .chmod(existing(), mode())
        case 106..<111:
            let ids: [UInt32] = [0, 1000, 1001]
            return .chown(existing(), ids[rng.below(3)], ids[rng.below(3)])
        default:
            return .utimens(existing(), OverlayScenario.baseTime + rng.below(1_000_000), rng.below(1_000_000_000),
                            noFollow: rng.chance(40))
        }
    }
}
