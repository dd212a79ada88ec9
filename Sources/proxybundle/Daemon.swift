import CSyscalls
import Logging
import ProxyBundleCore
import ProxyBundleDelivery
import ProxyBundleFUSE
#if canImport(Glibc)
import Glibc
#endif

/// Running the file system: in this process (foreground), or in a detached copy of this
/// program that reports back through a pipe once it has mounted.
enum Daemon {
    /// The environment variable through which a detached daemon learns its readiness pipe.
    static let readyVariable = "PROXYBUNDLE_READY_FD"
    /// When set to 1, the daemon ends (SIGTERM) when the process that started it exits.
    static let exitWithParentVariable = "PROXYBUNDLE_EXIT_WITH_PARENT"
    /// For tests: how many seconds a detached mount waits for its daemon's readiness (by
    /// default `readySeconds`), so that a daemon that misses it is seen without the wait.
    static let readyTimeoutVariable = "PROXYBUNDLE_READY_TIMEOUT"
    /// How long a detached mount waits for its daemon to report that it has mounted.
    static let readySeconds = 30

    /// Opens the layers, mounts, reports readiness and serves until unmounted.
    static func serve(_ plan: MountPlan, logger: Logger) throws(Failure) -> Int32 {
        if getenv(exitWithParentVariable).map({ String(cString: $0) }) == "1" {
            _ = pb_set_parent_death_signal(SIGTERM)
        }
        let ready = getenv(readyVariable).flatMap { Int32(String(cString: $0)) }
        // systemd's readiness socket: told by the process systemd started (in the foreground:
        // `mount` exec'd this image in its own pid), never by a detached daemon it does not know
        let notifySocket = SystemdNotify.takeSocket()
        // the caller's umask is applied by the kernel, or with POSIX ACLs by the daemon (see
        // `Overlay.masked`), never the daemon's own
        umask(0)
        // one malloc arena for all workers: with one per worker, the cache's nodes spread over
        // several heaps, each with its own slack (after the bench's walk: 4.4 MB resident with
        // one, 4.5-5.7 MB with the default); each thread's own cache of small blocks stays
        _ = pb_use_one_malloc_arena()
        raiseOpenFileLimit()
        do throws(Failure) {
            // held for the daemon's life (the kernel lets go of it at exit, also after a crash)
            let claim = plan.substitution.map(WriterClaim.init)
            if !plan.readOnly { try claim?.take() }
            // a gc under way finishes first; until the mount is listed, none starts (see Store.markInUse)
            var inUse = Store.markInUse(plan.patches.map(\.bytes))
            defer { inUse.forEach { close($0) } }  // when the mount failed
            let session = try open(plan, claim: claim, logger: logger)
            // the patches' directories are watched as their indexes read them, from the mount on
            if plan.options.watch { session.server.overlay.watchPatchDirectories() }
            do throws(Session.Failure) { try session.mount(at: plan.mountpoint) } catch { throw Failure(text: error.description) }
            // libfuse 3.14 refuses relatime and nodiratime: they are set on the mount itself
            if plan.options.fuse.contains(where: MountOptions.setOnTheMount.contains) {
                let relatime = plan.options.fuse.last { ["atime", "noatime", "relatime"].contains($0) } == "relatime"
                let set = plan.options.fuse.contains("nodiratime") ? pb_MOUNT_ATTR_NODIRATIME : 0
                let error = plan.mountpoint.withCString { pb_set_mount_attributes($0, set, relatime ? pb_MOUNT_ATTR__ATIME : 0) }
                if error != 0 { logger.warning("relatime or nodiratime not set on the mount: \(Errno(-error).name)") }
            }
            inUse.forEach { close($0) }
            inUse = []
            if plan.options.autoUnmount { try AutoUnmount.watch(plan.mountpoint) }
            // a log is text: a path's bytes that are not UTF-8 are written \xHH
            // a list of thousands would make a line of megabytes: past a few, the count and the ends
            var patches: String
            switch plan.patches.count {
            case 0: patches = ""
            case 1...8: patches = " under patches \(plan.patches.map(\.description).joined(separator: ", "))"
            default: patches = " under \(plan.patches.count) patches, \(plan.patches[0]) to \(plan.patches[plan.patches.count - 1])"
            }
            // read before the mount is reported ready (see `Session.mount`)
            let indexed = session.server.overlay.indexedDirectories
            if indexed > 0 { patches += " (\(indexed) directories of the patches read)" }
            let top = plan.substitution.map { "with \($0)" } ?? "with no substitution (read-only)"
            logger.info("mounted \(plan.main)\(patches) \(top) on \(plan.mountpoint)")
            if plan.options.watch { session.server.startWatching() }
            if let notifySocket, ready == nil {
                SystemdNotify.readyWhenAnswering(plan.mountpoint, socket: notifySocket, logger: logger)
            }
            if let ready {
                report(Array("ready".utf8), to: ready)
                // detached: what libfuse or fusermount3 might still write goes nowhere
                let null = Glibc.open("/dev/null", O_WRONLY)
                if null >= 0 { _ = dup2(null, 2); close(null) }
            }
            _ = chdir("/")
            let status = session.run(maxThreads: plan.options.maxThreads, spinMicroseconds: plan.options.spin)
            // the next mount of the substitution need not wait for the rest of the exit
            claim?.release()
            logger.info("unmounted \(plan.mountpoint)")
            return status
        } catch {
            if let ready { report(Array("error: ".utf8) + error.line.bytes, to: ready) }
            throw error
        }
    }

    private static func open(_ plan: MountPlan, claim: WriterClaim?, logger: Logger) throws(Failure) -> Session {
        let overlay: Overlay
        do {
            // reading the main bundle and the patches leaves their access times alone
            // the main bundle's own descriptor stays open: `which` finds it when the mount covers it
            let folds = plan.options.casefold
            let main = try Layer(path: plan.main, preservesAccessTimes: true, keepsPath: true, foldsNames: folds)
            var patches: [Layer] = []
            for path in plan.patches { patches.append(try Layer(path: path, preservesAccessTimes: true, foldsNames: folds, indexed: true)) }
            // and the substitution is reached with the mount's access-time options
            let substitution = try plan.substitution.map { path throws(Errno) in
                try Layer(path: path, accessTimes: plan.options.accessTimes, foldsNames: folds)
            }
            overlay = try Overlay(main: main, patches: patches, substitution: substitution, writable: !plan.readOnly,
                                  substitutionPath: plan.substitution,
                                  cachesLookups: plan.options.timeouts != .none,
                                  warn: { message in logger.warning("\(message)") })
        } catch {
            throw Failure("cannot open the layers: \(error)")
        }
        let server = FuseServer(overlay: overlay, timeouts: plan.options.timeouts, logger: logger,
                                mountpoint: plan.mountpoint,
                                usesACL: plan.options.acl,
                                // asked in a request: no waiting there
                                claimsSubstitution: { claim.map { (try? $0.take(patience: 0)) != nil } ?? false })
        var options = (["subtype=proxybundle", "default_permissions"] + plan.options.fuse.filter { !MountOptions.setOnTheMount.contains($0) })
            .map(RawArguments.bytes(of:))
        if !options.contains(where: { $0.starts(with: "fsname=".utf8) }) { options.append(Array("fsname=".utf8) + plan.main.bytes) }
        do {
            return try Session(server: server, options: options, transport: plan.options.transport)
        } catch {
            throw Failure(text: error.description)
        }
    }

    /// Every file open through the mount is a descriptor here, and so is every directory
    /// being listed: the soft limit (often 1,024) goes up to the hard one.
    private static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }

    private static func report(_ message: [UInt8], to fd: Int32) {
        let line = message + [UInt8(ascii: "\n")]
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }
}

extension Daemon {
    /// The descriptor a detached daemon image reads its patches from (see `DaemonImage.PatchList`).
    static let childPatchesFD: Int32 = 4

    /// Starts `arguments` (the daemon image's, see `DaemonImage`) as a detached copy of this
    /// program in its own session, and returns once it reports that it has mounted and the
    /// mount answers. Otherwise the daemon is stopped and any mount it made taken away
    /// (see `stop`), and the failure says why.
    static func startDetached(_ arguments: [String], patches: DaemonImage.PatchList?, mountpoint: RawPath) throws(Failure) {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw Failure("cannot create a pipe: \(Errno(errno).description)") }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        defer { close(pipeEnds[0]) }
        // the daemon's stderr until it is ready: why fusermount3 refused a mount is written there
        var template = Array("/tmp/proxybundle-mount-XXXXXX".utf8CString)
        let errors = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        if errors >= 0 { template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) } }
        defer { if errors >= 0 { close(errors) } }
        let childReadyFD: Int32 = 3
        // mounts already there are not the daemon's to take away if it fails
        let mountsBefore = Set(MountTable.current().mounts.map(\.id))
        let pid: pid_t
        do throws(Failure) {
            pid = try spawn(arguments, readyWriteEnd: pipeEnds[1], as: childReadyFD, stderr: errors, patches: patches?.fd)
        } catch {
            close(pipeEnds[1])
            if let patches { close(patches.fd) }
            throw error
        }
        close(pipeEnds[1])
        if let patches { close(patches.fd) }
        let seconds = readyTimeout
        let message = readLine(pipeEnds[0], timeoutSeconds: seconds)
        if message == .line(Array("ready".utf8)) {
            if Daemon.answers(mountpoint) { return }
            stop(pid, mountpoint: mountpoint, before: mountsBefore)
            throw Failure("the daemon mounted \(mountpoint) but the mount does not answer; it was stopped")
        }
        // a failed start leaves nothing behind: no daemon, and no mount it made
        let stoppedAlive = stop(pid, mountpoint: mountpoint, before: mountsBefore)
        let reason = errors >= 0 ? lastLine(of: errors) : nil
        if message == .timedOut {
            // as systemd does with a mount that takes too long: stopped, not left to finish
            // behind the back of a command that failed
            let what = stoppedAlive ? "was stopped" : "then exited"
            throw Failure("cannot mount on \(mountpoint): the daemon (PID \(pid)) did not report ready within \(seconds) s and \(what)"
                          + (reason.map { ": \($0)" } ?? ""))
        }
        if case .line(let message) = message, message.starts(with: "error: ".utf8) {
            let failure = Array(message.dropFirst(7))
            // the real reason fusermount3 gave, in place of the guess
            if let reason, failure.starts(with: "cannot mount on".utf8) {
                throw Failure("cannot mount on \(mountpoint): \(reason)")
            }
            throw Failure(ByteText(bytes: failure))
        }
        throw Failure("the daemon exited before mounting \(mountpoint)" + (reason.map { ": \($0)" } ?? ""))
    }

    /// Stops daemon `pid` that has not mounted as it should (SIGTERM, then SIGKILL after
    /// `stopSeconds`), waits for it, and takes away a proxybundle mount it left on
    /// `mountpoint` (the one mount not among the mount IDs `before`, if nothing covers it): a
    /// daemon killed between its mount and its readiness leaves a mount whose connection is
    /// gone. Returns whether the daemon was still running when told to stop.
    @discardableResult
    private static func stop(_ pid: pid_t, mountpoint: RawPath, before: Set<Int>) -> Bool {
        var status: Int32 = 0
        let running = waitpid(pid, &status, WNOHANG) == 0
        if running {
            kill(pid, SIGTERM)
            var waits = stopSeconds * 100
            while waitpid(pid, &status, WNOHANG) == 0 {
                if waits == 0 {
                    kill(pid, SIGKILL)
                    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                    break
                }
                waits -= 1
                usleep(10_000)
            }
        }
        // a detach takes away the topmost mount there: only when that is the one new
        // proxybundle mount (not another command's, nor one mounted over it since)
        let there = MountTable.current().mounts.filter { $0.mountpoint == mountpoint }
        let new = there.filter { $0.type == "fuse.proxybundle" && !before.contains($0.id) }
        if new.count == 1, there.last?.id == new.first?.id {
            if getuid() == 0 {
                _ = mountpoint.withCString { umount2($0, Int32(MNT_DETACH)) }
            } else {
                try? Unprivileged.fusermount([Array("-u".utf8), Array("-z".utf8), mountpoint.bytes])
            }
        }
        return running
    }

    /// How long a stopped daemon has to exit before it is killed.
    private static let stopSeconds = 5

    /// The seconds to wait for readiness: `readySeconds`, or the test's in `readyTimeoutVariable`
    /// (at most 2^31, some 68 years, so that it counts in milliseconds without overflow).
    private static var readyTimeout: Int {
        getenv(readyTimeoutVariable).flatMap { Int(String(cString: $0)) }.map { min(max(1, $0), 1 << 31) } ?? readySeconds
    }

    /// The last line written to the file open as `fd` by anyone but this program (which
    /// reports its own failure there too): fusermount3's or libfuse's reason.
    private static func lastLine(of fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var offset: off_t = 0
        while true {
            let count = pread(fd, &chunk, chunk.count, offset)
            if count <= 0 { break }
            bytes += chunk[..<count]
            offset += off_t(count)
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        return lines.last { $0.contains { !$0.isWhitespace } && !$0.hasPrefix("proxybundle: ") }.map(String.init)
    }

    /// Whether `mountpoint` is a proxybundle mount that answers a stat.
    static func answers(_ mountpoint: RawPath) -> Bool {
        var st = stat()
        guard mountpoint.withCString({ stat($0, &st) }) == 0 else { return false }
        return MountTable.current().mount(at: mountpoint)?.type == "fuse.proxybundle"
    }

    private static func spawn(_ arguments: [String], readyWriteEnd: Int32, as childFD: Int32,
                              stderr: Int32, patches: Int32?) throws(Failure) -> pid_t {
        var descriptors: [Int32: Spawn.Descriptor] = [0: .null, 1: .null, 2: stderr >= 0 ? .copy(of: stderr) : .null,
                                                      childFD: .copy(of: readyWriteEnd)]
        if let patches { descriptors[childPatchesFD] = .copy(of: patches) }
        // the environment as its bytes (a HOME that is not UTF-8 stays what it is)
        let environment = Environment.entries.filter { !$0.starts(with: (readyVariable + "=").utf8) }
            + [Array("\(readyVariable)=\(childFD)".utf8)]
        let argv = DaemonImage.argumentBytes(arguments)
        switch Spawn.start("/proc/self/exe", argv, environment: environment, descriptors: descriptors, newSession: true) {
        case .success(let pid): return pid
        case .failure(let error): throw Failure("cannot start the daemon: \(error.description)")
        }
    }

    /// What the daemon said on its readiness pipe.
    private enum Said: Equatable {
        case line([UInt8])
        /// The pipe closed with nothing said: the daemon exited.
        case ended
        /// Nothing by the deadline: the daemon is still at it.
        case timedOut
    }

    /// One line (bytes) from `fd`, waiting at most `timeoutSeconds` in all.
    private static func readLine(_ fd: Int32, timeoutSeconds: Int) -> Said {
        var bytes: [UInt8] = []
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var byte: UInt8 = 0
        let deadline = monotonicMilliseconds() + timeoutSeconds * 1000
        while true {
            let left = deadline - monotonicMilliseconds()
            guard left > 0 else { return .timedOut }
            let ready = poll(&poller, 1, Int32(clamping: left))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return ready == 0 ? .timedOut : .ended }
            let count = read(fd, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        return bytes.isEmpty ? .ended : .line(bytes)
    }

    static func monotonicMilliseconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}

/// The process environment.
enum Environment {
    /// Each "NAME=value" entry, as its bytes.
    static var entries: [[UInt8]] {
        var result: [[UInt8]] = []
        var pointer = environ
        while let entry = pointer.pointee {
            result.append(RawPath(cString: entry).bytes)
            pointer += 1
        }
        return result
    }
}
