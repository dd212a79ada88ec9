import Foundation

/// Readers that loop over `files/0` ... `files/19` of a mount while it switches images, each
/// read required to give `VERSION N` for one of `versions`; `stop()` ends them and returns the
/// first read that gave anything else.
final class VersionReaders {
    private let done = Flag(), failures = Flag()
    private let group = DispatchGroup()

    init(_ mountpoint: String, readers: Int, versions: [String]) {
        let done = done, failures = failures
        for reader in 0..<readers {
            DispatchQueue.global().async(group: group) {
                var round = 0
                while !done.isSet {
                    for i in 0..<20 {
                        let file = (i + reader + round) % 20
                        let text = try? Disk.read(mountpoint + "/files/\(file)")
                        if !versions.contains(where: { text == "\($0) \(file)" }) {
                            failures.set("files/\(file): \(text ?? "read failed")")
                        }
                    }
                    round += 1
                }
            }
        }
    }

    func stop() -> String? {
        done.set("done")
        group.wait()
        return failures.value
    }
}
