import ProxyBundleCore

/// One directory's resources as CoreFoundation files them (`_CFBundleReadDirectory`,
/// CFBundle_Resources.c): every entry is a resource, whatever its kind (files, directories such
/// as nib folders, `.storyboardc` and `.bundle`, symlinks), except `._` files
/// (`_CFIterateDirectory` skips them); each is found by its own name, and on a device with an
/// idiom, `NAME~ipad.EXT` (or `~iphone`) is found by `NAME.EXT` too, in place of this
/// directory's own `NAME.EXT`.
struct ResourceDirectory {
    /// The names in the directory, in byte order.
    let names: [String]
    /// A name looked up (its key, when case folds) → the entry it finds.
    private let entries: [String: String]
    private let foldsCase: Bool

    init(names unordered: [String], idiom: Device.Idiom?, foldsCase: Bool = false) {
        names = unordered.filter { !$0.hasPrefix("._") }.sorted(by: ResourcePath.byteOrder)
        self.foldsCase = foldsCase
        let key = { (name: String) in foldsCase ? CaseFold.key(name) : name }
        var entries: [String: String] = [:]
        var variants: [(generic: String, name: String)] = []
        for name in names where entries[key(name)] == nil {
            entries[key(name)] = name
            if let idiom, let generic = ResourceDirectory.generic(name, product: "~" + idiom.suffix) {
                variants.append((key(generic), name))
            }
        }
        // a device's variant replaces the generic name, never another variant's own name
        for (generic, name) in variants where entries[generic] == nil || entries[generic].map(key) == generic {
            entries[generic] = name
        }
        self.entries = entries
    }

    /// The entry that a lookup of `name` finds here, if any.
    func entry(_ name: String) -> String? {
        entries[foldsCase ? CaseFold.key(name) : name]
    }

    /// `name` without `product` (`~ipad`), when it names that product's variant: the product
    /// runs from a `~` to the next `.` (or the end), found from the end of the name before any
    /// `-` (`_CFBundleVersionForFileName`, CFBundle_SplitFileName.c). Platform suffixes
    /// (`-iphoneos`) are not modelled.
    static func generic(_ name: String, product: String) -> String? {
        let characters = Array(name)
        var dot = characters.count
        var index = characters.count - 1
        while index > 0 {
            let character = characters[index]
            if character == "." { dot = index }
            if character == "~" {
                if String(characters[index ..< dot]) == product {
                    return String(characters[..<index] + characters[dot...])
                }
            } else if character == "-" {
                return nil
            }
            index -= 1
        }
        return nil
    }

    /// The names of resources of `type` (`strings`; with or without a leading dot): those whose
    /// extension is `type`, from the last dot or from the first (`jpg.gz`), as
    /// `_CFBundleSplitFileName` files them by type.
    func names(ofType type: String) -> [String] {
        let wanted = type.hasPrefix(".") ? String(type.dropFirst()) : type
        return names.filter { ResourceDirectory.types(of: $0).contains(wanted) }
    }

    /// A name's types: after its last dot, and after its first one when that is another.
    static func types(of name: String) -> [String] {
        let characters = Array(name)
        guard let last = characters.lastIndex(of: "."), last != characters.count - 1,
              let first = characters.firstIndex(of: ".") else { return [] }
        let end = String(characters[(last + 1)...])
        return first == last ? [end] : [end, String(characters[(first + 1)...])]
    }
}
