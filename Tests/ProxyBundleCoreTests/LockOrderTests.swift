import Foundation
@testable import ProxyBundleCore
import XCTest

/// The lock order's checker (`LockOrder`) trips on each kind of violation and on nothing else;
/// the suite runs in debug, where it checks.
final class LockOrderTests: XCTestCase {
    override func setUp() {
        XCTAssertTrue(LockOrder.checks, "the test suite runs a debug build, whose locks check their order")
    }

    func testTakingLocksInRankOrderIsAllowed() {
        let outer = Locked(0, rank: .changes)
        let middle = Locked(0, rank: .nodeTable)
        let leaf = Locked(0, rank: .knownNames)
        let found = LockOrder.violations {
            outer.withLock { _ in middle.withLock { _ in leaf.withLock { _ in } } }
            // taken again after it was let go
            leaf.withLock { _ in }
        }
        XCTAssertEqual(found, [String]())
    }

    func testAnInversionNamesBothLocks() {
        let table = Locked(0, rank: .nodeTable)
        let cache = Locked(0, rank: .directoryCache)
        let found = LockOrder.violations {
            table.withLock { _ in cache.withLock { _ in } }
        }
        XCTAssertEqual(found.count, 1)
        XCTAssert(found.first?.contains("taking `directoryCache` (rank 5)") == true, "\(found)")
        XCTAssert(found.first?.contains("holds `nodeTable` (rank 6)") == true, "\(found)")
        XCTAssert(found.first?.contains("LockOrderTests.swift") == true, "where each was taken: \(found)")
    }

    func testAReentrantSharedTakeTrips() {
        let changes = ReadWriteLock(rank: .changes)
        let found = LockOrder.violations {
            changes.lockShared()
            changes.lockShared()
            changes.unlockShared()
            changes.unlockShared()
        }
        XCTAssertEqual(found.count, 1)
        XCTAssert(found.first?.contains("again") == true, "\(found)")
    }

    func testTwoLocksOfOneRankTrip() {
        let one = Locked(0, rank: .directoryCache)
        let other = Locked(0, rank: .directoryCache)
        XCTAssertEqual(LockOrder.violations { one.withLock { _ in other.withLock { _ in } } }.count, 1)
    }

    func testNoLockIsTakenUnderALeaf() {
        // ranked above it, but a leaf takes nothing
        let leaf = Locked(0, rank: .currentView)
        let higher = Locked(0, rank: .local)
        let found = LockOrder.violations { leaf.withLock { _ in higher.withLock { _ in } } }
        XCTAssertEqual(found.count, 1)
        XCTAssert(found.first?.contains("under a leaf") == true, "\(found)")
    }

    func testNoSystemCallUnderTheNodeTable() {
        let table = Locked(0, rank: .nodeTable)
        let found = LockOrder.violations {
            table.withLock { _ in _ = try? Sys.fstat(0) }
            _ = try? Sys.fstat(0)
        }
        XCTAssertEqual(found.count, 1)
        XCTAssert(found.first?.contains("under `nodeTable`") == true, "\(found)")
    }

    func testNoKernelNotificationUnderALockButInvalidations() {
        let invalidations = Locked(0, rank: .invalidations)
        let changes = ReadWriteLock(rank: .changes)
        let found = LockOrder.violations {
            invalidations.withLock { _ in LockOrder.willNotifyKernel() }
            changes.lockShared()
            LockOrder.willNotifyKernel()
            changes.unlockShared()
        }
        XCTAssertEqual(found.count, 1)
        XCTAssert(found.first?.contains("under `changes`") == true, "\(found)")
    }

    func testTheNodeTableDropsDescriptorsOnlyOnceUnlocked() throws {
        // a removed node's kept descriptor is closed when the node goes: after the table's lock
        let table = NodeTable(root: Placement(top: 0, bottom: 0, isDirectory: true))
        let generation = table.generation
        let id = table.remember(parent: rootNodeID, name: Array("f".utf8), placement: .file(in: 0), kind: 8,
                                identity: 1, resolvedAt: nil, in: generation)
        let fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let found = LockOrder.violations {
            table.detach(parent: rootNodeID, name: Array("f".utf8), keeping: fd)
            table.forget(id, count: 1)
        }
        XCTAssertEqual(found, [String]())
        // closed: on the closing thread, soon
        let deadline = Date().addingTimeInterval(10)
        while fcntl(fd, F_GETFD) >= 0 && Date() < deadline { usleep(1000) }
        XCTAssertEqual(fcntl(fd, F_GETFD), -1)
    }

    /// Outside `violations(in:)`, a violation stops the process, naming both locks: run in a
    /// child (this test binary, asked for `testInvertedLocksInAChild` alone).
    func testAViolationStopsTheProcess() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["ProxyBundleCoreTests.LockOrderTests/testInvertedLocksInAChild"]
        process.environment = ProcessInfo.processInfo.environment.merging(["PROXYBUNDLE_INVERT_LOCKS": "1"]) { $1 }
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal, text)
        XCTAssert(text.contains("lock order violated: taking `changes`"), text)
        XCTAssert(text.contains("holds `nodeTable`"), text)
    }

    /// The inversion `testAViolationStopsTheProcess` runs; nothing unless asked for.
    func testInvertedLocksInAChild() {
        guard ProcessInfo.processInfo.environment["PROXYBUNDLE_INVERT_LOCKS"] == "1" else { return }
        let table = Locked(0, rank: .nodeTable)
        let changes = ReadWriteLock(rank: .changes)
        table.withLock { _ in
            changes.lockShared()
            changes.unlockShared()
        }
    }
}
