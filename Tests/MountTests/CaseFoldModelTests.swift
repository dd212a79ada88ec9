import Foundation
import ProxyBundleCore
import ProxyBundleResources
import XCTest

/// A `-o casefold` mount compared entry by entry with the model of its rules (`FoldedLayers`,
/// which folds with the same tables but merges on its own), for generated stacks of mixed-case
/// layers, before and after writes through the mount. Names are compared as bytes: Swift's
/// strings call NFC and NFD spellings equal, and here they must not be.
final class CaseFoldModelTests: XCTestCase {
    var fx: MountFixture!

    override func tearDown() {
        fx?.tearDown()
    }

    /// Spellings that fold together in groups: case, ß, NFC against NFD, the sigmas, and the
    /// Turkish i's (dotless ı stays apart from I, dotted İ apart from i).
    static let pool = [
        "a", "A", "readme.txt", "README.TXT", "ReadMe.txt", "Straße", "STRASSE", "strasse",
        "caf\u{E9}", "cafe\u{301}", "CAF\u{C9}", "\u{3C3}", "\u{3A3}", "\u{3C2}", "\u{130}.txt", "i\u{307}.txt",
        "\u{131}.txt", "I.txt", "Data", "data", "DATA",
    ]

    /// A small generator with a seed, so that a failing stack can be made again.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
    }

    /// Fills `dir` (of one layer) with entries named from the pool: files, directories (two
    /// of one folded name too, as archives made on Windows unpack), `.wh.` files and, below
    /// the root, now and then an opaque marker.
    static func fill(_ dir: String, depth: Int, layer: Int, using random: inout Generator) throws {
        try Disk.mkdir(dir)
        for _ in 0 ..< Int.random(in: 3 ... 7, using: &random) {
            let name = pool.randomElement(using: &random) ?? "a"
            let path = dir + "/" + name
            if FileManager.default.fileExists(atPath: path) { continue }
            switch Int.random(in: 0 ..< 10, using: &random) {
            case 0 ..< 3 where depth < 2:
                try fill(path, depth: depth + 1, layer: layer, using: &random)
                let other = recased(name, using: &random)
                if Array(other.utf8) != Array(name.utf8), !FileManager.default.fileExists(atPath: dir + "/" + other) {
                    try fill(dir + "/" + other, depth: depth + 1, layer: layer, using: &random)
                }
            case 3 where layer > 0:
                try Disk.write(dir + "/.wh." + name, "")
            default:
                try Disk.write(path, "\(layer):\(name)")
            }
        }
        if depth > 0 && layer > 0 && Int.random(in: 0 ..< 8, using: &random) == 0 {
            try Disk.write(dir + "/.wh..wh..opq", "")
        }
    }

    /// The path with the case of each ASCII letter flipped at random (the case of any other
    /// letter may change what it folds to: `ı` upper-cased is `I`).
    static func recased(_ path: String, using random: inout Generator) -> String {
        let bytes = path.utf8.map { byte -> UInt8 in
            let isLetter = (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A
            return isLetter && Bool.random(using: &random) ? byte ^ 0x20 : byte
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Compares the mount's directory `dir` (as listed) and everything beneath with the model.
    func compare(_ model: FoldedLayers, _ dir: String, using random: inout Generator, seed: UInt64) throws {
        let inMount = dir.isEmpty ? fx.mountpoint : fx.inMount(dir)
        let shown = try Disk.list(inMount).map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        let modelled = model.names(in: dir).map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        XCTAssertEqual(shown, modelled, "seed \(seed): the listing of '\(dir)'")
        for name in model.names(in: dir) {
            let path = dir.isEmpty ? name : dir + "/" + name
            switch model.kind(of: path) {
            case .directory?:
                try compare(model, path, using: &random, seed: seed)
            case .file?:
                let expected = model.contents(of: path, limit: 1 << 16).map { String(decoding: $0, as: UTF8.self) }
                XCTAssertEqual(try? Disk.read(fx.inMount(path)), expected, "seed \(seed): \(path)")
                let other = CaseFoldModelTests.recased(path, using: &random)
                XCTAssertEqual(try? Disk.read(fx.inMount(other)), expected, "seed \(seed): \(path) as \(other)")
            default:
                break
            }
        }
    }

    /// The model of the layers as they are on disk now: the substitution, the patches, the main bundle.
    func model(_ patches: [String]) throws -> FoldedLayers {
        FoldedLayers(layers: try ([fx.substitution] + patches + [fx.main]).map { try Layer(path: $0) })
    }

    func testGeneratedStacksMatchTheModelBeforeAndAfterWrites() throws {
        for round in 0 ..< 6 {
            let seed = UInt64(0x9E37_79B9) &* UInt64(round + 1) | 1
            var random = Generator(state: seed)
            fx = try MountFixture(name + "\(round)")
            try? FileManager.default.removeItem(atPath: fx.main)
            let patches = [fx.root + "/p1", fx.root + "/p2"]
            try CaseFoldModelTests.fill(fx.main, depth: 0, layer: 0, using: &random)
            for (index, patch) in patches.enumerated() {
                try CaseFoldModelTests.fill(patch, depth: 0, layer: index + 1, using: &random)
            }
            try fx.start(["-o", "casefold"], patches: patches)
            try compare(try model(patches), "", using: &random, seed: seed)

            // writes through the mount, each by a spelling of its own
            let files = try MergedView.walk(fx.mountpoint).filter { $0.value.kind == "file" }.keys.sorted()
            for (index, file) in files.enumerated() {
                let path = fx.inMount(CaseFoldModelTests.recased(file, using: &random))
                switch index % 4 {
                case 0: try Disk.write(path, "written \(index)")
                case 1: XCTAssertEqual(unlink(path), 0, "seed \(seed): unlink \(path)")
                case 2:
                    // a new spelling of the last name (Foundation's path functions trip over
                    // combining marks here)
                    var names = file.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
                    names[names.count - 1] = CaseFoldModelTests.recased(names[names.count - 1], using: &random)
                    let renamed = names.joined(separator: "/")
                    XCTAssertEqual(rename(path, fx.inMount(renamed)), 0, "seed \(seed): rename \(path)")
                default: break
                }
            }
            try Disk.write(fx.inMount("New.TXT"), "new")
            try compare(try model(patches), "", using: &random, seed: seed)
            fx.tearDown()
            fx = nil
        }
    }
}
