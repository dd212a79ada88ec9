// A worker for the mount tests' StressTests: for a bounded time, seeded random file-system
// calls on a small shared namespace below a directory (the mount), made with raw syscalls so
// that several workers race each other on the same names. Not part of the product.
//
//     stress-worker --seed N --seconds S --dir PATH [--invalidate-percent P]
//                   [--letters abcde] [--max-depth 3] [--ops create,rename,...]
//
// Prints one `counts OP RESULT=N ...` line per kind of call at the end and, as they happen,
// one `UNEXPECTED OP PATH [PATH2] ERRNO` line per call that failed with an errno that races
// cannot explain (EIO above all). Exits 0 if there was none, 1 if there was, 2 on bad arguments.
import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

/// SplitMix64: small, seedable, the same sequence everywhere.
struct Random {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}

enum Op: Int, CaseIterable {
    case create, write, read, truncate, rename, exchange, unlink, mkdir, rmdir, readdir, stat,
         symlink, link, invalidate

    var name: String { String(describing: self) }

    /// Errnos that concurrent changes to the same names explain.
    var expected: Set<Int32> {
        var set: Set<Int32> = [ENOENT, ENOTDIR]
        switch self {
        case .create: set.formUnion([EEXIST, EISDIR])
        case .write, .read, .truncate: set.insert(EISDIR)
        case .rename, .exchange: set.formUnion([EEXIST, ENOTEMPTY, EISDIR, EINVAL])
        case .unlink: set.insert(EISDIR)
        case .mkdir, .symlink: set.insert(EEXIST)
        case .rmdir: set.insert(ENOTEMPTY)
        case .link: set.formUnion([EEXIST, EPERM])
        case .readdir, .stat, .invalidate: break
        }
        return set
    }
}

func errnoName(_ code: Int32) -> String {
    let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EEXIST: "EEXIST",
        EXDEV: "EXDEV", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", EINVAL: "EINVAL", ENOSPC: "ENOSPC",
        EROFS: "EROFS", EMLINK: "EMLINK", ENOTEMPTY: "ENOTEMPTY", ELOOP: "ELOOP", ESTALE: "ESTALE",
        ENOTCONN: "ENOTCONN", ECONNABORTED: "ECONNABORTED", EBUSY: "EBUSY", EACCES: "EACCES", ENAMETOOLONG: "ENAMETOOLONG",
        EINTR: "EINTR", EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", ENODATA: "ENODATA", EFBIG: "EFBIG",
    ]
    return names[code] ?? "errno\(code)"
}

func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in
        var done = 0
        while done < bytes.count {
            let n = Glibc.write(1, bytes.baseAddress! + done, bytes.count - done)
            if n <= 0 { return }
            done += n
        }
    }
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

// MARK: arguments


var seed: UInt64 = 1
var seconds = 10.0
var root = ""
var invalidatePercent = 1
var letters = ["a", "b", "c", "d", "e"]
var maxDepth = 3
var allowed = Set(Op.allCases)
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard let value = arguments.popFirst() else { say("missing value for \(flag)"); exit(2) }
    switch flag {
    case "--seed": seed = value.hasPrefix("0x") ? UInt64(value.dropFirst(2), radix: 16) ?? 1 : UInt64(value) ?? 1
    case "--seconds": seconds = Double(value) ?? 10
    case "--dir": root = value
    case "--invalidate-percent": invalidatePercent = Int(value) ?? 1
    case "--letters": letters = value.map { String($0) }
    case "--max-depth": maxDepth = max(1, min(3, Int(value) ?? 3))
    case "--ops": allowed = Set(value.split(separator: ",").compactMap { name in Op.allCases.first { $0.name == name } })
    default: say("unknown argument \(flag)"); exit(2)
    }
}
guard !root.isEmpty else { say("usage: stress-worker --seed N --seconds S --dir PATH"); exit(2) }

// MARK: the namespace

/// By default five names at each of three levels: few enough that workers collide all the
/// time, and the names the main bundle uses (StressTests builds it from the same letters).
struct Worker {
    let root: String
    let letters: [String]
    let maxDepth: Int
    /// The kinds of calls drawn (`--ops`); an invalidation percentage applies only if allowed.
    let allowed: Set<Op>
    let invalidatePercent: Int
    var random: Random
    /// Bytes to write; one buffer, sliced, so that writing costs no allocation.
    var data = [UInt8](repeating: 0, count: 64 << 10)
    var readBuffer = [UInt8](repeating: 0, count: 64 << 10)
    var counts = [[String: Int]](repeating: [:], count: Op.allCases.count)
    var unexpected = 0

    init(seed: UInt64, root: String, invalidatePercent: Int, letters: [String], maxDepth: Int, allowed: Set<Op>) {
        self.allowed = allowed
        self.root = root
        self.letters = letters
        self.maxDepth = maxDepth
        self.invalidatePercent = invalidatePercent
        random = Random(state: seed)
        for i in data.indices { data[i] = UInt8(truncatingIfNeeded: random.next()) }
    }

    mutating func randomPath() -> String {
        let depth = min(maxDepth, [1, 2, 2, 3, 3, 3][random.below(6)])
        var path = root
        for _ in 0..<depth { path += "/" + letters[random.below(letters.count)] }
        return path
    }

    mutating func writeLength() -> Int { random.chance(80) ? random.below(4096) : random.below(data.count) }

    // MARK: running

    /// Records a call's result: 0 or more is success, -1 reads errno.
    mutating func record(_ op: Op, _ result: Int, _ paths: String...) {
        let key: String
        if result >= 0 {
            key = "ok"
        } else {
            let code = errno
            key = errnoName(code)
            if !op.expected.contains(code) {
                unexpected += 1
                say("UNEXPECTED \(op.name) \(paths.joined(separator: " ")) \(key)")
            }
        }
        counts[op.rawValue][key, default: 0] += 1
    }

    mutating func weightedOp() -> Op {
        let roll = random.below(100)
        if roll < invalidatePercent && allowed.contains(.invalidate) { return .invalidate }
        let table: [(Op, Int)] = [
            (.create, 12), (.write, 12), (.read, 12), (.truncate, 4), (.rename, 10), (.exchange, 3),
            (.unlink, 8), (.mkdir, 10), (.rmdir, 6), (.readdir, 10), (.stat, 8), (.symlink, 3), (.link, 2),
        ].filter { allowed.contains($0.0) }
        guard !table.isEmpty else { return .stat }
        var pick = random.below(table.reduce(0) { $0 + $1.1 })
        for (op, weight) in table {
            if pick < weight { return op }
            pick -= weight
        }
        return .stat
    }

    mutating func step() {
        let op = weightedOp()
        let path = randomPath()
        switch op {
        case .create:
            var flags = O_WRONLY | O_CREAT
            if random.chance(30) { flags |= O_TRUNC }
            if random.chance(20) { flags |= O_EXCL }
            let fd = open(path, flags, 0o644)
            record(op, Int(fd), path)
            if fd >= 0 {
                record(.write, Glibc.write(fd, data, writeLength()), path)
                close(fd)
            }
        case .write:
            let fd = open(path, random.chance(20) ? O_WRONLY | O_APPEND : O_WRONLY)
            record(op, Int(fd), path)
            if fd >= 0 {
                record(op, pwrite(fd, data, writeLength(), off_t(random.below(96 << 10))), path)
                if random.chance(10) { record(op, Int(fsync(fd)), path) }
                close(fd)
            }
        case .read:
            let fd = open(path, O_RDONLY)
            record(op, Int(fd), path)
            if fd >= 0 {
                var total = 0
                while total < 4 << 20 {
                    let n = Glibc.read(fd, &readBuffer, readBuffer.count)
                    if n <= 0 {
                        if n < 0 { record(op, n, path) }
                        break
                    }
                    total += n
                }
                close(fd)
            }
        case .truncate:
            record(op, Int(Glibc.truncate(path, off_t(random.below(96 << 10)))), path)
        case .rename:
            let target = randomPath()
            let flags = random.chance(20) ? pb_RENAME_NOREPLACE : 0
            record(op, Int(pb_renameat2(AT_FDCWD, path, AT_FDCWD, target, flags)), path, target)
        case .exchange:
            let target = randomPath()
            record(op, Int(pb_renameat2(AT_FDCWD, path, AT_FDCWD, target, pb_RENAME_EXCHANGE)), path, target)
        case .unlink:
            record(op, Int(Glibc.unlink(path)), path)
        case .mkdir:
            record(op, Int(Glibc.mkdir(path, 0o755)), path)
        case .rmdir:
            record(op, Int(Glibc.rmdir(path)), path)
        case .readdir:
            guard let dir = opendir(path) else { record(op, -1, path); return }
            record(op, 0, path)
            while true {
                errno = 0
                guard let entry = Glibc.readdir(dir) else {
                    if errno != 0 { record(op, -1, path) }
                    break
                }
                if random.chance(25) {
                    // an entry just listed may be gone already; what it must never be is an I/O error
                    // not entry.pointee.d_name: that copies 256 bytes, past the end of a short last record
                    let name = UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name)!)
                    let child = path + "/" + String(cString: name.assumingMemoryBound(to: CChar.self))
                    var st = stat()
                    record(.stat, Int(lstat(child, &st)), child)
                }
            }
            closedir(dir)
        case .stat:
            var st = stat()
            record(op, Int(lstat(path, &st)), path)
        case .symlink:
            record(op, Int(Glibc.symlink("/nonexistent-proxybundle-stress/" + letters[random.below(letters.count)], path)), path)
        case .link:
            let target = randomPath()
            record(op, Int(Glibc.link(path, target)), path, target)
        case .invalidate:
            let fd = open(root + "/.invalidate", O_WRONLY)
            record(op, Int(fd), root + "/.invalidate")
            if fd >= 0 {
                record(op, Glibc.write(fd, "\n", 1), root + "/.invalidate")
                close(fd)
            }
        }
    }

}

var worker = Worker(seed: seed, root: root, invalidatePercent: invalidatePercent, letters: letters, maxDepth: maxDepth, allowed: allowed)
_ = pb_set_parent_death_signal(SIGKILL)
let started = now()
var steps = 0
while now() - started < seconds {
    worker.step()
    steps += 1
}
for op in Op.allCases {
    let line = worker.counts[op.rawValue].sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    say("counts \(op.name) \(line)")
}
say("steps \(steps) unexpected \(worker.unexpected) seconds \(now() - started)")
exit(worker.unexpected == 0 ? 0 : 1)
