import XCTest

/// A test with a mount fixture and a real registry (Debian's docker-registry on 127.0.0.1),
/// both stopped whatever happens; the store of pulled images under the fixture's root.
class RegistryTestCase: XCTestCase {
    var fx: MountFixture!
    var registry: Registry!
    var store: String { fx.root + "/store" }

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        registry = try Registry.start(in: fx.root + "/registry")
        let started = registry
        addTeardownBlock { started?.stop() }
    }

    override func tearDown() {
        fx?.stop()
        registry?.stop()
        fx?.tearDown()
    }
}
