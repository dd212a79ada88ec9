#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer's driver for a Swift executable (shared/notes/fuzzing.md): SwiftPM names an
/// executable's entry point itself, so `main.swift` calls `Fuzzing.run`, which hands the
/// command line to `LLVMFuzzerRunDriver`; the runtime calls `LLVMFuzzerTestOneInput` below
/// with every input. A finding is a crash: a check that fails calls `Fuzzing.fail`.
public enum Fuzzing {
    nonisolated(unsafe) static var body: (([UInt8]) -> Void)?

    /// Runs libFuzzer with `test` as the target, then exits with the driver's status.
    public static func run(_ test: @escaping ([UInt8]) -> Void) -> Never {
        body = test
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput))
    }

    /// A broken invariant: said on stderr, then a crash, so libFuzzer keeps the input.
    public static func fail(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
        fatalError("invariant broken: " + message, file: file, line: line)
    }

    /// A directory of this run's own (`FUZZ_SCRATCH`, which Scripts/fuzz.sh makes and removes,
    /// else a new one in /dev/shm), on tmpfs: no disk I/O for the files an input makes.
    public static func scratch(_ name: String) -> String {
        if let given = getenv("FUZZ_SCRATCH") {
            let path = String(cString: given) + "/" + name
            mkdir(String(cString: given), 0o755)
            mkdir(path, 0o755)
            return path
        }
        var template = Array("/dev/shm/pb-fuzz-\(name)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { fail("cannot make a scratch directory: \(String(cString: strerror(errno)))") }
        return String(cString: made)
    }

    /// Writes `bytes` to `path` (created or truncated).
    public static func write(_ bytes: [UInt8], to path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { fail("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var at = 0
        while at < bytes.count {
            let n = bytes[at...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { fail("cannot write \(path): \(String(cString: strerror(errno)))") }
            at += n
        }
    }

    /// Removes `name` in `dir` and everything beneath it (modes and set-ID bits aside: root).
    public static func remove(_ name: String, in dir: Int32 = AT_FDCWD) {
        remove(Array(name.utf8CString), in: dir)
    }

    /// Removes the entry of the NUL-terminated `name` in `dir`, of any bytes, and what it holds.
    public static func remove(_ name: [CChar], in dir: Int32) {
        var st = stat()
        guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            let fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                for entry in names(fd) { remove(entry, in: fd) }
                close(fd)
            }
            unlinkat(dir, name, AT_REMOVEDIR)
        } else {
            unlinkat(dir, name, 0)
        }
    }

    /// The names in the directory `fd` (without `.` and `..`), sorted, as text (for messages and
    /// comparisons: a name that is not UTF-8 is repaired, so use `names` to reach it).
    public static func entries(_ fd: Int32) -> [String] {
        names(fd).map { String(cString: $0) }.sorted()
    }

    /// The names in the directory `fd` (without `.` and `..`), NUL-terminated, byte for byte:
    /// a layer's names are of any bytes.
    public static func names(_ fd: Int32) -> [[CChar]] {
        let copy = dup(fd)
        guard copy >= 0, let stream = fdopendir(copy) else { return [] }
        defer { closedir(stream) }
        var names: [[CChar]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> [CChar] in
                let bytes = raw.bindMemory(to: CChar.self)
                return Array(bytes.prefix(while: { $0 != 0 })) + [0]
            }
            if name != [46, 0] && name != [46, 46, 0] { names.append(name) }
        }
        return names
    }

    /// The names in the directory at `path`, sorted; nil when it cannot be opened.
    public static func entries(at path: String) -> [String]? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return entries(fd)
    }
}

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// What the fuzzer runtime calls with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func LLVMFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    Fuzzing.body?(bytes)
    return 0
}
