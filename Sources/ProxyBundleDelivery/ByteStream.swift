#if canImport(Glibc)
import Glibc
#endif

/// Reads a file descriptor in large pieces, hashing every byte that passes and stopping at a
/// size limit: a layer's tar stream, whose sha256 is its diff-id.
final class ByteStream {
    private let fd: Int32
    private var buffer: UnsafeMutableRawBufferPointer
    private var start = 0, end = 0
    private(set) var hash = SHA256()
    private(set) var total: UInt64 = 0
    let limit: UInt64
    /// Called after each piece read, with the bytes read so far (progress).
    var onRead: ((UInt64) -> Void)?

    init(fd: Int32, limit: UInt64) {
        self.fd = fd
        self.limit = limit
        buffer = .allocate(byteCount: 1 << 20, alignment: 16)
    }

    deinit { buffer.deallocate() }

    enum Failure: Error { case truncated, tooLarge, readError(Int32) }

    /// Refills the buffer; false at the end of the stream.
    private func fill() throws(Failure) -> Bool {
        start = 0
        end = 0
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw .readError(errno) }
            if n == 0 { return false }
            end = n
            hash.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            total += UInt64(n)
            if total > limit { throw .tooLarge }
            onRead?(total)
            return true
        }
    }

    /// Exactly `count` bytes, handed to `body` in pieces; `.truncated` if the stream ends first.
    func read(_ count: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        var left = count
        while left > 0 {
            if start == end, try !fill() { throw Failure.truncated }
            let take = min(Int(min(left, UInt64(Int.max))), end - start)
            try body(UnsafeRawBufferPointer(rebasing: buffer[start..<start + take]))
            start += take
            left -= UInt64(take)
        }
    }

    func bytes(_ count: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        try read(UInt64(count)) { out.append(contentsOf: $0) }
        return out
    }

    /// One 512-byte block, or nil at a clean end of the stream.
    func block() throws -> [UInt8]? {
        if start == end, try !fill() { return nil }
        return try bytes(512)
    }

    /// Reads to the end (hashing), as a tar reader does after the end-of-archive blocks.
    func drain() throws {
        while try fill() {}
        start = end
    }
}
