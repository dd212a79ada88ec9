// The XML property list reader, through what resolve and check read a bundle's Info.plist
// with (`BundleInfo(plist:)`), on any bytes (those starting as a binary list are the other
// target's). Checks: no crash, no hang, and the same answer twice (nothing depends on state).
import FuzzSupport
import ProxyBundleResources

let binaryMagic = Array("bplist00".utf8)

Fuzzing.run { data in
    guard !data.starts(with: binaryMagic) else { return }
    let info = BundleInfo(plist: data)
    guard BundleInfo(plist: data) == info else { Fuzzing.fail("two readings of one list differ") }
    guard !info.localizations.contains("") else { Fuzzing.fail("an empty localization was kept") }
}
