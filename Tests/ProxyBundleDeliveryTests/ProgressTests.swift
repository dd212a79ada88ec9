import Foundation
@testable import ProxyBundleDelivery
import XCTest

/// The status line of an extraction: on a terminal (a pseudo-terminal here) it shows the
/// bytes, entries, rate and share of the blob, rewritten in place; elsewhere nothing at all.
final class ProgressTests: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.path + "/pb-progress-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory + "/work", withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    /// A layer blob (tar+gzip) of a 3 MB file and a few small ones, and its descriptor.
    func makeLayer() throws -> (blob: String, layer: ImageLayout.Layer) {
        let source = directory + "/source"
        try FileManager.default.createDirectory(atPath: source + "/small", withIntermediateDirectories: true)
        var bytes = [UInt8](repeating: 0, count: 3_000_000)
        for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 2654435761 >> 13) }
        try Data(bytes).write(to: URL(fileURLWithPath: source + "/big"))
        for i in 0..<5 { try "file \(i)".write(toFile: source + "/small/\(i)", atomically: true, encoding: .utf8) }
        let tar = directory + "/layer.tar"
        try run("/usr/bin/tar", ["--sort=name", "-C", source, "-cf", tar, "."])
        let diffID = "sha256:" + SHA256.hex(Array(try Data(contentsOf: URL(fileURLWithPath: tar))))
        try run("/usr/bin/gzip", ["-n", tar])
        let compressed = Array(try Data(contentsOf: URL(fileURLWithPath: tar + ".gz")))
        let layer = ImageLayout.Layer(digest: "sha256:" + SHA256.hex(compressed),
                                      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", diffID: diffID)
        return (tar + ".gz", layer)
    }

    func run(_ program: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw DeliveryError("\(program) failed") }
    }

    func testExtractionShowsItsProgressInPlaceOnATerminal() throws {
        let (blob, layer) = try makeLayer()
        let terminal = try PseudoTerminal()
        // every piece read is shown (no 100 ms pause between updates), so the test does not
        // depend on how fast the machine extracts
        let progress = Progress(fd: terminal.follower, enabled: true, interval: 0)
        _ = try LayerExtraction.extract(blob: blob, layer: layer, to: directory + "/layer", work: directory + "/work",
                                        limits: ExtractLimits(), progress: progress, label: "layer 1/1")
        progress.finish("layer 1/1: done")
        let shown = terminal.finish()
        XCTAssertTrue(shown.hasPrefix("\r\u{1B}[Klayer 1/1: checking "), shown.debugDescription)
        let updates = shown.components(separatedBy: "\r\u{1B}[K").filter { $0.hasPrefix("layer 1/1: extracting ") }
        XCTAssertGreaterThanOrEqual(updates.count, 2, "a 3 MB tar is read in more than one piece: \(shown.debugDescription)")
        let last = updates.last ?? ""
        XCTAssertTrue(last.range(of: #"^layer 1/1: extracting [0-9.]+ MB, [0-9]+ entries, [0-9.]+ [kMG]?B/s, [0-9]+% of the blob$"#,
                                 options: .regularExpression) != nil, last.debugDescription)
        XCTAssertEqual(shown.utf8.filter { $0 == 0x0A }.count, 1, "one line, rewritten in place: \(shown.debugDescription)")
        XCTAssertTrue(shown.hasSuffix("\r\u{1B}[Klayer 1/1: done\r\n"), shown.debugDescription)
    }

    func testNothingIsShownWhenStandardErrorIsNotATerminal() throws {
        let (blob, layer) = try makeLayer()
        let file = open(directory + "/stderr", O_RDWR | O_CREAT | O_TRUNC, 0o644)
        XCTAssertGreaterThanOrEqual(file, 0)
        defer { close(file) }
        let progress = Progress.terminal(file)
        XCTAssertFalse(progress.enabled)
        _ = try LayerExtraction.extract(blob: blob, layer: layer, to: directory + "/layer", work: directory + "/work",
                                        limits: ExtractLimits(), progress: progress, label: "layer 1/1")
        progress.finish("layer 1/1: done")
        var st = stat()
        XCTAssertEqual(fstat(file, &st), 0)
        XCTAssertEqual(st.st_size, 0)
        XCTAssertEqual(try String(contentsOfFile: directory + "/layer/small/3", encoding: .utf8), "file 3")
    }

    func testSizesAndRatesReadAsAPersonWritesThem() {
        XCTAssertEqual(Progress.size(812), "812 B")
        XCTAssertEqual(Progress.size(3_400_000), "3.4 MB")
        XCTAssertEqual(Progress.size(1_250_000_000), "1.3 GB")
        XCTAssertEqual(Progress.rate(170_000_000, 2), "85.0 MB/s")
    }
}

/// A pseudo-terminal: the follower side is what the program writes to, as to a terminal; a
/// thread reads the leader side (so a long output never blocks the writer).
final class PseudoTerminal: @unchecked Sendable {
    let leader: Int32
    let follower: Int32
    private var output: [UInt8] = []
    private let done = DispatchSemaphore(value: 0)

    init() throws {
        // posix_openpt, unlockpt and ptsname as the kernel offers them (Swift's Glibc lacks them)
        leader = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0, number: UInt32 = 0
        let TIOCSPTLCK: UInt = 0x4004_5431, TIOCGPTN: UInt = 0x8004_5430
        guard leader >= 0, ioctl(leader, TIOCSPTLCK, &unlock) == 0, ioctl(leader, TIOCGPTN, &number) == 0 else {
            throw DeliveryError("no pseudo-terminal: errno \(errno)")
        }
        follower = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard follower >= 0 else { throw DeliveryError("cannot open /dev/pts/\(number): errno \(errno)") }
        XCTAssertEqual(isatty(follower), 1)
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(leader, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }  // EIO once the follower is closed
                output += buffer[..<n]
            }
            done.signal()
        }
    }

    /// Closes the follower, waits for the reader to drain the leader, and returns the text.
    func finish() -> String {
        close(follower)
        done.wait()
        close(leader)
        return String(decoding: output, as: UTF8.self)
    }
}
