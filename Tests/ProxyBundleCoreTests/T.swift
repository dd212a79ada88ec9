import XCTest
final class T: XCTestCase { func testX() {} }
