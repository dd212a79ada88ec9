import ProxyBundleCore
/// The calling convention of mount helpers: `mount -t fuse.proxybundle MAIN MOUNTPOINT -o
/// OPTIONS` (and an fstab line of that type) makes mount.fuse3 run `proxybundle MAIN
/// MOUNTPOINT -o OPTIONS`, which is taken as `proxybundle mount ...`.
enum MountHelper {
    static let commands = Set(ProxyBundle.configuration.subcommands.compactMap { $0.configuration.commandName } + ["help"])

    /// `arguments` with `mount` in front when they are a helper call: a first argument that is
    /// not a command or an option and names a path (it has a slash).
    static func arguments(_ arguments: [String]) -> [String] {
        guard let first = arguments.first, !commands.contains(first), !first.hasPrefix("-"),
              first.contains("/"), arguments.count >= 2 else { return arguments }
        var helped = ["mount"] + arguments
        if let last = helped.lastIndex(of: "-o"), last + 1 < helped.count, let caller = MountCaller.find() {
            let options = withoutAddedDefaults(helped[last + 1], caller: caller, mountpoint: RawPath(argument: arguments[1]))
            if options.isEmpty { helped.removeSubrange(last...last + 1) } else { helped[last + 1] = options }
        }
        return helped
    }

    /// mount.fuse3, run as root, appends `dev` to the options unless they say `nodev`, and
    /// `suid` unless they say `nosuid`, whether or not the administrator wrote them (see
    /// `MountCaller`), so that every helper mount would allow devices and set-user-ID files
    /// where `proxybundle mount` (libfuse's defaults) allows neither. Those two appended
    /// words are dropped, and put back where mount(8) was given them itself (its `-o`, or the
    /// fstab line): an explicit `dev,suid` mounts without `nodev`/`nosuid`.
    static func withoutAddedDefaults(_ options: String, caller: MountCaller, mountpoint: RawPath) -> String {
        var words = options.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let added = (words.contains("nodev") ? [] : ["dev"]) + (words.contains("nosuid") ? [] : ["suid"])
        guard !added.isEmpty, words.count >= added.count, Array(words.suffix(added.count)) == added else { return options }
        words.removeLast(added.count)
        for word in added where caller.written(word, or: "no" + word, mountpoint: mountpoint) == true { words.append(word) }
        return words.joined(separator: ",")
    }
}
