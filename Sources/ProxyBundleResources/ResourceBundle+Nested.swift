/// Bundles inside an app: resource bundles (`Kit.bundle`, at any depth), frameworks
/// (`Frameworks/X.framework`, `Contents/Frameworks/X.framework`) and app extensions
/// (`PlugIns/X.appex`), each with its own resources directory and Info.plist.
extension ResourceBundle {
    /// The extensions of directories that are bundles of their own inside an app.
    public static let nestedExtensions = ["bundle", "framework", "appex"]

    /// Whether a directory of this name is a bundle of its own inside an app.
    public static func isBundle(named name: String) -> Bool {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return false }
        return nestedExtensions.contains(String(name[name.index(after: dot)...]))
    }

    /// The bundle at `path` (a directory of the tree inside this one), as the app loads it:
    /// an app extension (`.appex`) runs in a process of its own, where it is the main bundle
    /// and chooses its languages itself; any other bundle is loaded by this bundle's process,
    /// whose main bundle it follows (`_CFBundleCopyPreferredLanguagesInList`).
    public func nested(at path: String) -> ResourceBundle {
        let isExtension = ResourcePath.split(path).name.hasSuffix(".appex")
        return ResourceBundle(tree: tree, path: path, main: isExtension ? nil : (main ?? self))
    }

    /// The bundle at `path` below this one, the main bundle: each bundle directory on the way
    /// (`PlugIns/Share.appex/Kit.bundle`: the extension, then its resource bundle) decides
    /// whose process loads what it holds. `path` itself is taken as a bundle whatever its name.
    public func bundle(at path: String) -> ResourceBundle {
        let names = ResourcePath.names(path)
        var bundle = self
        for (index, name) in names.enumerated() where ResourceBundle.isBundle(named: name) || index == names.count - 1 {
            bundle = bundle.nested(at: names[...index].joined(separator: "/"))
        }
        return bundle
    }

    /// The innermost bundle inside the app that holds `path` (a directory above it named as a
    /// bundle), nil when only the main bundle does.
    public static func nestedBundle(holding path: String) -> String? {
        let names = ResourcePath.names(path).dropLast()
        guard let last = names.lastIndex(where: isBundle(named:)) else { return nil }
        return names[...last].joined(separator: "/")
    }
}
