import Foundation
import PackagePlugin

/// Writes the git commit the package is built from into a Swift file of the target
/// (`BuildCommit.swift`: `let buildCommit = "..."`), before every build. The file is rewritten
/// only when the commit changed, so that an unchanged tree rebuilds nothing. Outside a git
/// checkout (a source tarball) the commit is `unknown`.
@main
struct BuildCommit: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let directory = context.pluginWorkDirectoryURL.appending(path: "Generated")
        let output = directory.appending(path: "BuildCommit.swift")
        let script = """
            mkdir -p "$3"
            commit=$(git -C "$1" describe --always --dirty --abbrev=12 --exclude='*' 2>/dev/null || echo unknown)
            text="/// The git commit of this build (Plugins/BuildCommit).
            public let buildCommit = \\"$commit\\""
            [ -f "$2" ] && [ "$(cat "$2")" = "$text" ] || printf '%s\\n' "$text" > "$2"
            """
        return [.prebuildCommand(displayName: "Stamping the build with its git commit",
                                 executable: URL(fileURLWithPath: "/bin/sh"),
                                 arguments: ["-c", script, "sh", context.package.directoryURL.path, output.path, directory.path],
                                 outputFilesDirectory: directory)]
    }
}
