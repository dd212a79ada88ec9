import ProxyBundleCore
import XCTest

/// The rules of a merged directory whose names fold (issue 38, items 1 to 5), one at a time.
final class FoldedMergeTests: XCTestCase {
    /// One real directory's entries: `name/` a directory, `~name` a 0/0 whiteout device.
    private func entries(_ names: [String]) -> [FoldedMerge.Entry] {
        names.map { name in
            if name.hasSuffix("/") { return FoldedMerge.Entry(name: Array(name.dropLast().utf8), isDirectory: true) }
            if name.hasPrefix("~") { return FoldedMerge.Entry(name: Array(name.dropFirst().utf8), isDirectory: false, isWhiteout: true) }
            return FoldedMerge.Entry(name: Array(name.utf8), isDirectory: false)
        }
    }

    private func part(_ directories: [String]...) -> FoldedMerge.Part {
        FoldedMerge.Part(directories: directories.map(entries))
    }

    private func served(_ merge: FoldedMerge, _ name: String) -> String? {
        guard let found = merge.serving(Array(name.utf8)) else { return nil }
        let places = found.places.map { "\($0.layer).\($0.directory):\(String(decoding: $0.name, as: UTF8.self))" }
        return String(decoding: found.name, as: UTF8.self) + (found.isDirectory ? "/ " : " ") + places.joined(separator: ",")
    }

    private func listed(_ merge: FoldedMerge) -> [String] {
        merge.listing.map { String(decoding: $0.name, as: UTF8.self) + ($0.isDirectory ? "/" : "") }
    }

    func testAnySpellingFindsTheHighestLayersEntry() {
        let merge = FoldedMerge([part(["Rock.DDS"]), part(["rock.dds", "Other"])])
        XCTAssertEqual(served(merge, "ROCK.dds"), "Rock.DDS 0.0:Rock.DDS")
        XCTAssertEqual(served(merge, "other"), "Other 1.0:Other")
        XCTAssertNil(served(merge, "rock"))
        XCTAssertEqual(listed(merge), ["Other", "Rock.DDS"])
    }

    func testDirectoriesMergeByFoldedNameAcrossLayers() {
        let merge = FoldedMerge([part(["Data/"]), part(["data/"]), part(["DATA"]), part(["data/"])])
        XCTAssertEqual(served(merge, "data"), "Data/ 0.0:Data,1.0:data", "a file below ends the merge")
        XCTAssertEqual(listed(merge), ["Data/"])
    }

    func testAFileAboveHidesEverySpellingBelow() {
        let merge = FoldedMerge([part(["textures"]), part(["Textures/"])])
        XCTAssertEqual(served(merge, "TEXTURES"), "textures 0.0:textures")
    }

    func testWhiteoutsHideEverySpelling() {
        let file = FoldedMerge([part([".wh.Rock.dds"]), part(["rock.DDS", "keep"])])
        XCTAssertNil(served(file, "rock.dds"))
        XCTAssertEqual(listed(file), ["keep"])
        let device = FoldedMerge([part(["~ROCK.DDS"]), part(["rock.dds"])])
        XCTAssertNil(served(device, "Rock.dds"))
        let ownLayer = FoldedMerge([part(["Rock.dds", ".wh.rock.DDS"]), part(["rock.dds"])])
        XCTAssertEqual(served(ownLayer, "rock.dds"), "Rock.dds 0.0:Rock.dds", "a whiteout hides only what is below")
        let mergeStops = FoldedMerge([part(["Data/", ".wh.DATA"]), part(["data/"])])
        XCTAssertEqual(served(mergeStops, "data"), "Data/ 0.0:Data")
    }

    func testAnOpaqueDirectoryHidesEveryLayerBelow() {
        let merge = FoldedMerge([part(["a", ".wh..wh..opq"]), part(["B"])])
        XCTAssertEqual(listed(merge), ["a"])
    }

    /// Item 5: two spellings in one layer.
    func testSpellingsInOneLayerTheFirstInByteOrderServes() {
        let files = FoldedMerge([part(["a.txt", "A.txt"])])
        XCTAssertEqual(served(files, "a.TXT"), "A.txt 0.0:A.txt")
        XCTAssertEqual(listed(files), ["A.txt"])
        let directories = FoldedMerge([part(["data/", "Data/", "DATA"])])
        XCTAssertEqual(served(directories, "data"), "DATA 0.0:DATA", "a file first: the directories never show")
        let merged = FoldedMerge([part(["data/", "Data/"]), part(["DATA/"])])
        XCTAssertEqual(served(merged, "data"), "Data/ 0.0:Data,0.0:data,1.0:DATA")
    }

    /// The entries of a layer's directories of one key, merged: a name in two of them is taken
    /// from the first directory.
    func testEntriesOfMergedDirectoriesOfOneLayer() {
        let merge = FoldedMerge([FoldedMerge.Part(directories: [entries(["x", "y"]), entries(["X", "z"])])])
        XCTAssertEqual(served(merge, "x"), "X 0.1:X", "X comes before x in byte order")
        let same = FoldedMerge([FoldedMerge.Part(directories: [entries(["x"]), entries(["x"])])])
        XCTAssertEqual(served(same, "X"), "x 0.0:x", "the same spelling in both: the first directory's")
        XCTAssertEqual(listed(merge), ["X", "y", "z"])
    }

    func testNamesEqualOnlyAfterNormalizationAreOneEntry() {
        let merge = FoldedMerge([part(["Caf\u{E9}"]), part(["CAFE\u{301}", "Straße"]), part(["STRASSE"])])
        XCTAssertEqual(listed(merge), ["Caf\u{E9}", "Straße"])
        XCTAssertEqual(served(merge, "strasse"), "Straße 1.0:Straße")
    }
}
