import Foundation
import XCTest

/// Directories made for a test under /tmp, with files written by relative path; removed in
/// tearDown.
class BundleTestCase: XCTestCase {
    private var made: [String] = []

    override func tearDownWithError() throws {
        for path in made { try? FileManager.default.removeItem(atPath: path) }
        made = []
        try super.tearDownWithError()
    }

    /// A new empty directory.
    func directory(_ label: String = "bundle") throws -> String {
        let path = NSTemporaryDirectory() + "pb-resources-\(label)-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        made.append(path)
        return path
    }

    /// A new directory holding `files` (relative path: contents); a path ending in `/` is a
    /// directory, contents starting with `->` a symlink to the rest.
    func tree(_ files: [String: String], _ label: String = "bundle") throws -> String {
        let root = try directory(label)
        try add(files, to: root)
        return root
    }

    func add(_ files: [String: String], to root: String) throws {
        for (path, contents) in files.sorted(by: { $0.key < $1.key }) {
            let full = root + "/" + path
            if path.hasSuffix("/") {
                try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true)
                continue
            }
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            if contents.hasPrefix("->") {
                try FileManager.default.createSymbolicLink(atPath: full, withDestinationPath: String(contents.dropFirst(2)))
            } else {
                try Data(contents.utf8).write(to: URL(fileURLWithPath: full))
            }
        }
    }

    func write(_ bytes: [UInt8], to path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// An XML property list with these string values.
    func plist(_ values: [String: String]) -> String {
        let entries = values.sorted { $0.key < $1.key }.map { "\t<key>\($0.key)</key>\n\t<string>\($0.value)</string>" }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
            \(entries.joined(separator: "\n"))
            </dict>
            </plist>
            """
    }
}
