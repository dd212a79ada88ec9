// The `Assets.car` reader (`AssetCatalog(bytes:)`, as resolve and check read a bundle's
// catalog), on any bytes. Checks: unreadable or read, never a crash or a hang; a catalog read
// answers for each of its names, and a rendition it chooses is one of the name's.
import FuzzSupport
import ProxyBundleResources

Fuzzing.run { data in
    guard let catalog = try? AssetCatalog(bytes: data) else { return }
    _ = catalog.thinned
    for name in catalog.names.prefix(64) {
        let renditions = catalog.renditions(named: name)
        for scale in 1...3 {
            for idiom in Device.Idiom.allCases {
                if let chosen = catalog.rendition(named: name, scale: scale, idiom: idiom), !renditions.contains(chosen) {
                    Fuzzing.fail("\(name): \(chosen) is not among its renditions")
                }
            }
        }
        _ = renditions.map(\.description)
    }
    guard catalog.names == catalog.names.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) else {
        Fuzzing.fail("the names are not in byte order")
    }
}
