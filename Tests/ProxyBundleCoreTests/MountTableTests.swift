import ProxyBundleCore
import XCTest

/// Parsing `/proc/self/mountinfo`.
final class MountTableTests: XCTestCase {
    private let sample = """
        22 27 0:21 / /proc rw,relatime - proc proc rw
        27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
        30 25 0:27 / /dev/shm rw,relatime master:3 shared:7 - tmpfs tmpfs rw,size=24682416k
        61 27 0:52 / /tmp/pb\\040test/mnt\\040point rw,nosuid,nodev,relatime shared:9 - fuse.proxybundle /srv/My\\040App.app rw,user_id=0,group_id=0
        62 27 0:53 /sub /weird\\011tab\\012newline\\134backslash rw - fuse.proxybundle src\\134x rw
        """

    func testParsesEveryField() {
        let table = MountTable(text: sample)
        XCTAssertEqual(table.mounts.count, 5)
        XCTAssertEqual(table.mounts[0].id, 22)
        XCTAssertEqual(table.mounts[0].device, "0:21")
        XCTAssertEqual(table.mounts[0].mountpoint, "/proc")
        XCTAssertEqual(table.mounts[0].type, "proc")
        XCTAssertEqual(table.mounts[0].source, "proc")
        XCTAssertEqual(table.mounts[1].id, 27)
        XCTAssertEqual(table.mounts[1].device, "254:0")
        XCTAssertEqual(table.mounts[1].mountpoint, "/")
        XCTAssertEqual(table.mounts[1].type, "ext4")
        XCTAssertEqual(table.mounts[1].source, "/dev/vda")
    }

    /// The mount a path lies on: the last mount whose mountpoint holds it, so a later mount
    /// covers an earlier one beneath it; a name that merely starts like a mountpoint is not in it.
    func testTheMountAPathLiesOn() {
        let table = MountTable(text: sample + """

            70 27 0:60 / /srv rw - tmpfs tmpfs rw
            71 70 0:61 / /srv/a/b rw - fuse.proxybundle x rw
            72 27 0:62 / /data/a rw - tmpfs tmpfs rw
            73 27 0:63 / /data rw - ext4 /dev/vdb rw
            """)
        XCTAssertEqual(table.mount(containing: "/srv/a/b/c")?.id, 71)
        XCTAssertEqual(table.mount(containing: "/srv/a/b")?.id, 71)
        XCTAssertEqual(table.mount(containing: "/srv/a/bc")?.id, 70)
        XCTAssertEqual(table.mount(containing: "/data/a/x")?.id, 73)
        XCTAssertEqual(table.mount(containing: "/home")?.id, 27)
    }

    func testOptionalFieldsBeforeTheSeparator() {
        let table = MountTable(text: sample)
        XCTAssertEqual(table.mounts[2].mountpoint, "/dev/shm")
        XCTAssertEqual(table.mounts[2].type, "tmpfs")
        XCTAssertEqual(table.mounts[2].source, "tmpfs")
    }

    func testOctalEscapesInMountpointAndSource() {
        let table = MountTable(text: sample)
        XCTAssertEqual(table.mounts[3].mountpoint, "/tmp/pb test/mnt point")
        XCTAssertEqual(table.mounts[3].source, "/srv/My App.app")
        XCTAssertEqual(table.mounts[3].type, "fuse.proxybundle")
        XCTAssertEqual(table.mounts[3].device, "0:52")
        XCTAssertEqual(table.mounts[4].mountpoint, "/weird\ttab\nnewline\\backslash")
        XCTAssertEqual(table.mounts[4].source, "src\\x")
    }

    func testIncompleteEscapesAreKeptVerbatim() {
        let table = MountTable(text: "70 1 0:60 / /a\\9z\\04 rw - tmpfs x\\ rw\n")
        XCTAssertEqual(table.mounts.count, 1)
        XCTAssertEqual(table.mounts.first?.mountpoint, "/a\\9z\\04")
        XCTAssertEqual(table.mounts.first?.source, "x\\")
    }

    func testMountAtFindsTheTopmostMount() {
        let text = """
            27 1 254:0 / / rw - ext4 /dev/vda rw
            80 27 0:70 / /mnt/stack rw - tmpfs first rw
            81 80 0:71 / /mnt/stack rw - fuse.proxybundle second rw
            82 27 0:72 / /mnt/stack/inner rw - tmpfs third rw
            """
        let table = MountTable(text: text)
        XCTAssertEqual(table.mount(at: "/mnt/stack")?.id, 81)
        XCTAssertEqual(table.mount(at: "/mnt/stack")?.source, "second")
        XCTAssertEqual(table.mount(at: "/mnt/stack/inner")?.id, 82)
        XCTAssertEqual(table.mount(at: "/")?.id, 27)
        XCTAssertNil(table.mount(at: "/mnt"))
        XCTAssertNil(table.mount(at: "/mnt/stack/"))
    }

    func testEscapedMountpointIsFoundByItsRealPath() {
        let table = MountTable(text: sample)
        XCTAssertEqual(table.mount(at: "/tmp/pb test/mnt point")?.id, 61)
        XCTAssertNil(table.mount(at: "/tmp/pb\\040test/mnt\\040point"))
    }

    func testMalformedLinesAreSkipped() {
        let text = """
            not a mount line at all
            x 27 0:1 / /bad-id rw - tmpfs t rw
            90 27 0:1 / /no-separator rw shared:1 tmpfs t rw extra
            91 27 0:1 / /too-short - tmpfs
            92 27 0:1 / /good rw - tmpfs good rw

            """
        let table = MountTable(text: text)
        XCTAssertEqual(table.mounts.map(\.id), [92])
        XCTAssertEqual(table.mounts.first?.mountpoint, "/good")
    }

    func testEmptyText() {
        XCTAssertEqual(MountTable(text: "").mounts, [])
    }

    func testCurrentTableHasTheRootAndProc() {
        let table = MountTable.current()
        XCTAssertNotNil(table.mount(at: "/"))
        XCTAssertEqual(table.mount(at: "/proc")?.type, "proc")
    }
}
