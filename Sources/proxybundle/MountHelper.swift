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
        return ["mount"] + arguments
    }
}
