import Foundation
import ProxyBundleCore

/// Leaves nothing mounted at a path, whatever state its daemon is in.
enum Unmounter {
    static func force(_ mountpoint: String) {
        for _ in 0..<3 {
            guard let mount = MountTable.current().mount(at: mountpoint) else { return }
            if umount2(mountpoint, 0) == 0 { continue }
            abortConnection(device: mount.device)
            _ = umount2(mountpoint, Int32(MNT_DETACH))
        }
    }

    /// Aborts a FUSE connection through fusectl so that nothing waits on a hung daemon.
    static func abortConnection(device: String) {
        guard let minor = device.split(separator: ":").last else { return }
        let connections = "/sys/fs/fuse/connections"
        if (try? FileManager.default.contentsOfDirectory(atPath: connections))?.isEmpty ?? true {
            _ = mount("fusectl", connections, "fusectl", 0, nil)
        }
        let abort = "\(connections)/\(minor)/abort"
        let fd = open(abort, O_WRONLY)
        if fd >= 0 {
            _ = write(fd, "1", 1)
            close(fd)
        }
    }
}
