// swift-tools-version:6.0
import PackageDescription

/// The folder of this manifest: linker options need whole paths.
let packageRoot = String(#filePath.dropLast("/Package.swift".count))

let package = Package(
    name: "proxybundle",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "proxybundle", targets: ["proxybundle"]),
        // Bundle resource lookup (NSBundle and UIImage rules) for other programs: no FUSE.
        .library(name: "ProxyBundleResources", targets: ["ProxyBundleResources"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // libfuse 3 as a system library; the only place that sets FUSE_USE_VERSION.
        .systemLibrary(
            name: "CFuse3",
            pkgConfig: "fuse3",
            providers: [.apt(["libfuse3-dev"])]
        ),
        // liburing, for FUSE over io_uring (CFuseShim's Uring.c).
        .systemLibrary(
            name: "CURing",
            pkgConfig: "liburing",
            providers: [.apt(["liburing-dev"])]
        ),
        // libcrypto (OpenSSL 3), for SHA-256: the system's, maintained, its security updates
        // Debian's.
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // C helpers for what Swift cannot call directly: GNU constants, raw system calls.
        .target(
            name: "CSyscalls",
            cSettings: [.define("_GNU_SOURCE")]
        ),
        // C helpers for libfuse's macros and versioned symbols, and the FUSE device's I/O
        // (over /dev/fuse and over io_uring).
        .target(
            name: "CFuseShim",
            dependencies: ["CFuse3", "CURing", "CSyscalls"],
            cSettings: [.define("_GNU_SOURCE")]
        ),
        // The overlay: layers, resolution, whiteouts, listings. No libfuse here.
        .target(
            name: "ProxyBundleCore",
            dependencies: ["CSyscalls"],
            plugins: ["BuildCommit"]
        ),
        // Stamps the core with the git commit it is built from (`proxybundle --version`).
        .plugin(name: "BuildCommit", capability: .buildTool()),
        // Bundle resource lookup over a directory, or over layers merged in-process. No libfuse.
        // Languages are matched by Apple's ICU as CoreFoundation matches them: the toolchain's
        // `_FoundationICU` (its static form needs the C++ runtime when linked -static-executable).
        .target(
            name: "ProxyBundleResources",
            dependencies: ["ProxyBundleCore", "CSyscalls"],
            linkerSettings: [.linkedLibrary("_FoundationICU"), .linkedLibrary("stdc++"), .linkedLibrary("m")]
        ),
        // Delivery of patches as OCI images: the store, safe layer extraction, skopeo. No libfuse.
        .target(
            name: "ProxyBundleDelivery",
            dependencies: ["CSyscalls", "CCrypto"]
        ),
        // Translation between the FUSE low-level protocol and the overlay.
        .target(
            name: "ProxyBundleFUSE",
            dependencies: [
                "ProxyBundleCore", "CFuse3", "CFuseShim",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "proxybundle",
            dependencies: [
                "ProxyBundleCore",
                "ProxyBundleFUSE",
                "ProxyBundleResources",
                "ProxyBundleDelivery",
                "CSyscalls",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            exclude: ["function-order.txt"],
            // lld packs the relative relocations (RELR, glibc 2.36): the 38,000 of a static Swift
            // runtime took 0.9 MB to read, and stayed resident, at every start of the daemon.
            // It also puts the functions the daemon runs side by side (Scripts/order-functions.sh
            // lists them), so they share pages instead of each keeping its own resident.
            linkerSettings: [.unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                                           "-Xlinker", "--symbol-ordering-file=\(packageRoot)/Sources/proxybundle/function-order.txt",
                                           "-Xlinker", "--no-warn-symbol-ordering"])]
        ),
        // Not part of the product: the racing client process of the mount tests' StressTests.
        .executableTarget(
            name: "stress-worker",
            dependencies: ["CSyscalls"]
        ),
        .testTarget(
            name: "ProxyBundleCoreTests",
            dependencies: ["ProxyBundleCore"]
        ),
        // Not part of the product: writes compiled asset catalogs for the unit and mount tests.
        .target(name: "CatalogWriter", path: "Tests/CatalogWriter"),
        .testTarget(
            name: "ProxyBundleResourcesTests",
            dependencies: ["ProxyBundleResources", "ProxyBundleCore", "CatalogWriter"]
        ),
        .testTarget(
            name: "ProxyBundleDeliveryTests",
            dependencies: ["ProxyBundleDelivery"]
        ),
        .testTarget(
            name: "MountTests",
            dependencies: ["proxybundle", "stress-worker", "ProxyBundleCore", "ProxyBundleResources", "CSyscalls",
                           "CatalogWriter", "ProxyBundleDelivery"]
        ),
    ]
)

// Fuzz targets, one per parser of untrusted input (Scripts/fuzz.sh builds and runs them): only
// with PROXYBUNDLE_FUZZ=1 in the environment, as they link libFuzzer's driver and are built with
// -sanitize=fuzzer,address in their own scratch path, never in the product's build.
if Context.environment["PROXYBUNDLE_FUZZ"] == "1" {
    let fuzzed: [(name: String, dependencies: [Target.Dependency])] = [
        ("tar", ["ProxyBundleDelivery"]),
        ("oci", ["ProxyBundleDelivery"]),
        ("plist-xml", ["ProxyBundleResources"]),
        ("plist-binary", ["ProxyBundleResources"]),
        ("assets-car", ["ProxyBundleResources"]),
        ("casefold", ["ProxyBundleCore"]),
        ("control", ["ProxyBundleCore"]),
    ]
    package.targets.append(.target(name: "FuzzSupport", path: "Fuzz/Support"))
    for target in fuzzed {
        package.products.append(.executable(name: "fuzz-" + target.name, targets: ["fuzz-" + target.name]))
        // lld: gold fails on the AddressSanitizer link of a debug build (shared/notes/fuzzing.md)
        package.targets.append(.executableTarget(name: "fuzz-" + target.name, dependencies: ["FuzzSupport"] + target.dependencies,
                                                 path: "Fuzz/" + target.name, exclude: ["corpus"],
                                                 linkerSettings: [.unsafeFlags(["-use-ld=lld"])]))
    }
}
