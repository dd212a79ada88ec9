// Writes the seeds of the assets-car target: catalogs as the tests make them (Fuzz/Seeds/make.sh
// compiles this with Tests/CatalogWriter). Argument: the directory to write to.
import Glibc

func save(_ bytes: [UInt8], _ name: String) {
    let fd = open(CommandLine.arguments[1] + "/" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

save(CatalogWriter().add(name: "icon", scale: 1, idiom: 1).add(name: "icon", scale: 2, idiom: 1).add(name: "icon", scale: 3, idiom: 1)
        .add(name: "icon", scale: 2, idiom: 2).add(name: "logo", scale: 0, idiom: 0).facet("tint").facet("Zebra").facet("été").bytes(),
     "names-scales-idioms.car")
save(CatalogWriter(keyFormat: [12, 17, 1, 2], thinning: "carutil 802.000000, thinned <mode app> <idiom 1> <scale 3>")
        .add(name: "icon", scale: 3, idiom: 1).bytes(), "thinned.car")
save(CatalogWriter(keyFormat: [17, 25, 13, 16, 7, 15, 12]).add(name: "a", scale: 2, idiom: 1, appearance: 1, subtype: 2436,
                                                                localization: 3, deploymentTarget: 8).bytes(), "key-order.car")
var paged = CatalogWriter(appearances: [("UIAppearanceAny", 0), ("UIAppearanceDark", 1)], leafCapacity: 2)
for name in ["a", "b", "c", "d", "e"] { paged = paged.add(name: name, scale: 2, idiom: 1).add(name: name, scale: 3, idiom: 2, appearance: 1) }
save(paged.bytes(), "paged-appearances.car")
save(CatalogWriter().add(identifier: 0, attributes: [1: 85, 2: 181, 12: 2]).add(name: "Images/icon", scale: 3, idiom: 0).bytes(),
     "atlas.car")
