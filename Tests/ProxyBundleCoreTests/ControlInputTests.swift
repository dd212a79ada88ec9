import ProxyBundleCore
import XCTest

/// What is written to the control files, read (`ControlInput`, `RemountRequest`): any bytes
/// arrive there, and the fuzz target `control` feeds them; its findings are kept here.
final class ControlInputTests: XCTestCase {
    func testLinesAreTrimmedAndEmptyOnesDropped() {
        XCTAssertEqual(ControlInput.lines(Array(" a/b \r\n\n\t\nc\n".utf8)), [Array("a/b".utf8), Array("c".utf8)])
        XCTAssertEqual(ControlInput.lines([]), [])
        XCTAssertEqual(ControlInput.lines(Array(" \r\n \n".utf8)), [])
        XCTAssertEqual(ControlInput.lines([0xFF, 0x0A, 0x00]), [[0xFF], [0x00]], "bytes, UTF-8 or not")
    }

    func testPatchPathsAreAbsoluteWithoutNulOutsideTheMount() throws {
        let mountpoint: RawPath = "/mnt/app"
        XCTAssertEqual(try ControlInput.patchPaths(Array("/srv/a\n /srv/b \n".utf8), mountpoint: mountpoint), ["/srv/a", "/srv/b"])
        XCTAssertEqual(try ControlInput.patchPaths([], mountpoint: mountpoint), [])
        for refused in ["relative", "/srv/a\nrelative", "/mnt/app", "/mnt/app/patch", "/srv/\u{0}a"] {
            XCTAssertThrowsError(try ControlInput.patchPaths(Array(refused.utf8), mountpoint: mountpoint), refused) { error in
                XCTAssertEqual(error as? Errno, Errno.invalid, refused)
            }
        }
        XCTAssertEqual(try ControlInput.patchPaths(Array("/mnt/application".utf8), mountpoint: mountpoint), ["/mnt/application"])
    }

    func testRemountOptions() throws {
        let request = try RemountRequest(Array("ro, entry_timeout=5,attr_timeout=0.5\nnegative_timeout=0".utf8))
        XCTAssertEqual(request.readOnly, true)
        XCTAssertEqual(request.entry, 5)
        XCTAssertEqual(request.attribute, 0.5)
        XCTAssertEqual(request.negative, 0)
        XCTAssertEqual(try RemountRequest(Array("rw,,".utf8)).readOnly, false)
        XCTAssertEqual(try RemountRequest([]), try RemountRequest(Array(" \n".utf8)))
        for refused in ["bogus", "ro,bogus=1", "entry_timeout=-1", "attr_timeout=inf", "negative_timeout=nan", "ro=1",
                        "entry_timeout", "entry_timeout=soon"] {
            XCTAssertThrowsError(try RemountRequest(Array(refused.utf8)), refused)
        }
    }

    /// Fuzz finding (control, crash-951744fa): an option that is only '=' split into no parts,
    /// and reading the first crashed the daemon. Now: EINVAL, as for any option not understood.
    func testAnOptionOfNothingAroundItsEqualsSignIsRefused() {
        for text in ["=", "ro,=", "=5", "entry_timeout=", "==", "rw,=,ro"] {
            XCTAssertThrowsError(try RemountRequest(Array(text.utf8)), text) { error in
                XCTAssertEqual(error as? Errno, Errno.invalid, text)
            }
        }
    }
}
