/// What resource lookup reads of a bundle's Info.plist, as CoreFoundation reads it.
public struct BundleInfo: Equatable, Sendable {
    /// `CFBundleDevelopmentRegion`: a non-empty string, else none (`CFBundleGetDevelopmentRegion`).
    public var developmentRegion: String?
    /// The non-empty strings of `CFBundleLocalizations` (`_copyBundleLocalizationsFromResources`).
    public var localizations: [String] = []
    /// `CFBundleAllowMixedLocalizations`: a nested bundle keeps its own language choice.
    public var allowsMixedLocalizations = false
    /// `CFBundleFollowParentLocalization`, or an app extension (`NSExtension`): the host
    /// process's language applies (`CFBundleFollowParentLocalization()`), not the main bundle's.
    public var followsParent = false

    public init() {}

    /// Read from a property list's bytes (XML or binary); what it lacks, or cannot be read,
    /// keeps its default.
    public init(plist bytes: [UInt8]) {
        guard let root = PropertyList.dictionary(in: bytes) else { return }
        if case .string(let region)? = root["CFBundleDevelopmentRegion"], !region.isEmpty { developmentRegion = region }
        localizations = root["CFBundleLocalizations"]?.strings ?? []
        allowsMixedLocalizations = root["CFBundleAllowMixedLocalizations"]?.boolValue ?? false
        followsParent = (root["CFBundleFollowParentLocalization"]?.boolValue ?? false) || root["NSExtension"] != nil
    }
}
