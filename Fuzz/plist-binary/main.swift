// The binary property list reader (`bplist00`), through what resolve and check read a
// bundle's Info.plist with (`BundleInfo(plist:)`). Every input is read after the magic
// `bplist00`, so the fuzzer spends its time inside the format. Checks: no crash, no hang,
// and the same answer twice.
import FuzzSupport
import ProxyBundleResources

let binaryMagic = Array("bplist00".utf8)

Fuzzing.run { data in
    let list = binaryMagic + data
    let info = BundleInfo(plist: list)
    guard BundleInfo(plist: list) == info else { Fuzzing.fail("two readings of one list differ") }
    guard !info.localizations.contains("") else { Fuzzing.fail("an empty localization was kept") }
}
