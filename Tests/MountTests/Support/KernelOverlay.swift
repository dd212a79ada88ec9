import CSyscalls
import Foundation
import XCTest

// MARK: - the kernel's overlay

enum KernelOverlay {
    /// Copies the fixture's substitution, converts it to overlayfs' forms and mounts it above the
    /// main bundle, read-only. Skips the test when overlayfs cannot be mounted here.
    static func mount(_ fx: MountFixture, at mountpoint: String, converted: String? = nil,
                      keep: Set<String> = []) throws {
        try mountStack([fx.substitution, fx.main], at: mountpoint, scratch: converted ?? fx.root + "/converted", keep: keep)
    }

    /// Mounts `layers` (top first; each but the last copied under `scratch` and converted to
    /// overlayfs' forms) as one read-only kernel overlay at `mountpoint`: what proxybundle must
    /// show for the same stack. Skips the test when overlayfs cannot be mounted here.
    static func mountStack(_ layers: [String], at mountpoint: String, scratch: String, keep: Set<String> = []) throws {
        try mountReadOnly(lowers: try convertedStack(layers, scratch: scratch, keep: keep), at: mountpoint)
    }

    /// A read-only overlay of `lowers` (overlayfs' lower directories, top first) at
    /// `mountpoint` (made if missing).
    static func mountReadOnly(lowers: [String], at mountpoint: String) throws {
        if Disk.lstat(mountpoint) == nil { try Disk.mkdir(mountpoint) }
        let options = "lowerdir=" + lowers.joined(separator: ":")
        guard Glibc.mount("overlay", mountpoint, "overlay", UInt(MS_RDONLY), options) == 0 else {
            throw MachineSkip.overlayfs(errno, options: options)
        }
    }

    /// `layers` as overlayfs' lower directories: each but the last copied (`cp -a`) to
    /// `scratch`/N and converted (see `convert`); the last as it is.
    static func convertedStack(_ layers: [String], scratch: String, keep: Set<String> = []) throws -> [String] {
        var result: [String] = []
        for (index, layer) in layers.enumerated() {
            guard index < layers.count - 1 else {
                result.append(layer)
                break
            }
            let copy = layers.count == 2 ? scratch : scratch + "/\(index)"
            try Disk.makeParent(copy)
            let made = try Spawn.run("/bin/cp", ["-a", layer, copy])
            guard made.status == 0 else { throw TestFailure("cp -a: \(made.error)") }
            // the roots below, down to the first opaque one
            var below: [String] = []
            for root in layers[(index + 1)...] {
                below.append(root)
                if isOpaque(root, names: (try? Disk.list(root)) ?? [], keep: keep) { break }
            }
            try convert(copy, original: layer, below: below, keep: keep)
            result.append(copy)
        }
        return result
    }

    /// A writable overlay of the fixture's main bundle at `mountpoint`, with `upper` (made empty
    /// if missing) and a work directory beside the mountpoint. Skips the test when overlayfs
    /// cannot be mounted here.
    static func mountWritable(_ fx: MountFixture, at mountpoint: String, upper: String) throws {
        try mountWritable(lowers: [fx.main], at: mountpoint, upper: upper)
    }

    /// A writable overlay of `lowers` (overlayfs' lower directories, top first) at `mountpoint`,
    /// with `upper` and a work directory beside the mountpoint. `extra` options are appended;
    /// `flags` are mount(2)'s (MS_NOATIME, ...).
    static func mountWritable(lowers: [String], at mountpoint: String, upper: String, extra: String = "",
                              flags: UInt = 0) throws {
        let work = mountpoint + "-work"
        for directory in [mountpoint, upper, work] where Disk.lstat(directory) == nil { try Disk.mkdir(directory) }
        let options = "lowerdir=\(lowers.joined(separator: ":")),upperdir=\(upper),workdir=\(work)" + extra
        guard Glibc.mount("overlay", mountpoint, "overlay", flags, options) == 0 else {
            throw MachineSkip.overlayfs(errno, options: options)
        }
    }

    /// Starts the fixture's mount and a writable kernel overlay of the same main bundle (with an
    /// empty upper directory), runs `exercise` on the root of each, and returns what each gave.
    /// Throws when the kernel's side gave nothing: equal to nothing proves nothing.
    static func onBoth(_ fx: MountFixture, options: [String] = [],
                       _ exercise: (String) throws -> [String]) throws -> (mine: [String], theirs: [String]) {
        let kernel = fx.root + "/kernel"
        defer { Unmounter.force(kernel) }
        try mountWritable(fx, at: kernel, upper: fx.root + "/kernel-upper")
        try fx.start(options)
        let result = (mine: try exercise(fx.mountpoint), theirs: try exercise(kernel))
        guard !result.theirs.isEmpty else { throw TestFailure("the exercise gave nothing on kernel overlayfs") }
        return result
    }

    /// Converts `copy`, a copy of the layer directory `original`, to overlayfs' forms:
    /// `.wh.NAME` becomes a 0/0 character device NAME (or, beside a directory NAME of the same
    /// layer, which it marks as made anew, `trusted.overlay.opaque=y` on that directory);
    /// `.wh..wh..opq` becomes `trusted.overlay.opaque=y` on its directory. Each directory's
    /// times are put back afterwards, so directory mtimes can be compared. Names in `keep` are
    /// left alone (to prove the comparison notices). `below` are the directories of the layers
    /// under this one that it merges unless it is opaque itself (originals, top first).
    ///
    /// In a directory that merges nothing below (opaque, or with no directory below it that it
    /// merges) a whiteout hides nothing, so it is dropped instead of converted: the kernel
    /// lists the whiteout devices of such a directory in readdir although lstat of them fails
    /// with ENOENT (seen on 6.18), an artifact proxybundle need not copy. proxybundle is still
    /// given them.
    static func convert(_ copy: String, original: String, below: [String], keep: Set<String>) throws {
        guard let st = Disk.lstat(copy) else { throw TestFailure("lstat \(copy): errno \(errno)") }
        let names = try Disk.list(original)
        let mergedBelow = isOpaque(original, names: names, keep: keep) ? [] : below
        for name in names {
            let path = copy + "/" + name
            guard let child = Disk.lstat(original + "/" + name) else { throw TestFailure("lstat \(path): errno \(errno)") }
            if name.hasPrefix(".wh..wh.") && (child.st_mode & S_IFMT) == S_IFDIR {
                // the daemon's own (its copy-up work directory), never shown
                try FileManager.default.removeItem(atPath: path)
                continue
            }
            if (child.st_mode & S_IFMT) == S_IFDIR {
                let anew = names.contains(".wh." + name) && !keep.contains(".wh." + name)
                if anew {
                    guard setxattr(path, "trusted.overlay.opaque", "y", 1, 0) == 0 else {
                        throw TestFailure("setxattr \(path): errno \(errno)")
                    }
                }
                let childBelow = anew ? [] : merged(name, under: mergedBelow, keep: keep)
                try convert(path, original: original + "/" + name, below: childBelow, keep: keep)
                continue
            }
            if mergedBelow.isEmpty && (child.st_mode & S_IFMT) == S_IFCHR && child.st_rdev == 0 {
                guard unlink(path) == 0 else { throw TestFailure("unlink \(path): errno \(errno)") }
                continue
            }
            guard name.hasPrefix(".wh."), !keep.contains(name) else { continue }
            guard unlink(path) == 0 else { throw TestFailure("unlink \(path): errno \(errno)") }
            if name == ".wh..wh..opq" {
                guard setxattr(copy, "trusted.overlay.opaque", "y", 1, 0) == 0 else {
                    throw TestFailure("setxattr \(copy): errno \(errno)")
                }
            } else if !mergedBelow.isEmpty, Disk.lstat(original + "/" + String(name.dropFirst(4))) == nil {
                let hidden = copy + "/" + String(name.dropFirst(4))
                guard mknod(hidden, S_IFCHR, 0) == 0 else { throw TestFailure("mknod \(hidden): errno \(errno)") }
            }
        }
        var times = [st.st_atim, st.st_mtim]
        guard utimensat(AT_FDCWD, copy, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw TestFailure("utimensat \(copy): errno \(errno)")
        }
    }

    /// The directories `name` of `parents` (lower directories a directory merges, top first)
    /// that the directory `name` merges: each that is a directory, until a layer has a whiteout
    /// for it, another kind of entry, or an opaque directory (merged, and the last). A layer
    /// without the name is passed over.
    private static func merged(_ name: String, under parents: [String], keep: Set<String>) -> [String] {
        var result: [String] = []
        for parent in parents {
            let whitedOut = !keep.contains(".wh." + name) && Disk.lstat(parent + "/.wh." + name) != nil
            guard let st = Disk.lstat(parent + "/" + name) else {
                if whitedOut { break }
                continue
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else { break }
            let path = parent + "/" + name
            result.append(path)
            if whitedOut || isOpaque(path, names: (try? Disk.list(path)) ?? [], keep: keep) { break }
        }
        return result
    }

    private static func isOpaque(_ directory: String, names: [String], keep: Set<String>) -> Bool {
        var flag: UInt8 = 0
        return (names.contains(".wh..wh..opq") && !keep.contains(".wh..wh..opq"))
            || (lgetxattr(directory, "trusted.overlay.opaque", &flag, 1) == 1 && flag == UInt8(ascii: "y"))
    }
}
