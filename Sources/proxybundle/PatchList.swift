import ProxyBundleCore

/// Patch directories listed one a line, in a file or on standard input (`-`): for the thousands
/// of layers a mod manager stacks, which no command line or option string holds.
enum PatchList {
    /// The directories `source` lists, in order (highest priority first); empty lines are
    /// passed over, and a line is the bytes it is (a path need not be UTF-8).
    static func read(_ source: RawPath) throws(Failure) -> [RawPath] {
        var error: Int32 = 0
        let bytes = source == "-" ? readAll(0, error: &error) : readBytes(source, error: &error)
        guard let bytes else { throw Failure("cannot read the patch list \(source): \(Errno(error).description)") }
        return bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).map { line in
            RawPath(bytes: Array(line.last == UInt8(ascii: "\r") ? line.dropLast() : line))
        }.filter { !$0.isEmpty }
    }
}
