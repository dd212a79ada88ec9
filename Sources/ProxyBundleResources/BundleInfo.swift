/// What resource lookup reads of a bundle's Info.plist, as CoreFoundation reads it. Every key
/// read is read here, from one property list.
public struct BundleInfo: Equatable, Sendable {
    /// `CFBundleDevelopmentRegion`: a non-empty string, else none (`CFBundleGetDevelopmentRegion`).
    public var developmentRegion: String?
    /// The non-empty strings of `CFBundleLocalizations` (`_copyBundleLocalizationsFromResources`).
    public var localizations: [String] = []
    /// `CFBundleAllowMixedLocalizations`: read of the main bundle (the process's), it lets every
    /// other bundle keep its own language choice (`CFBundleAllowMixedLocalizations()`).
    public var allowsMixedLocalizations = false
    /// `CFBundleFollowParentLocalization`, or an app extension (`NSExtension`): the host
    /// process's language applies (`CFBundleFollowParentLocalization()`), not the main bundle's.
    public var followsParent = false
    /// `UIDeviceFamily`: 1 iPhone, 2 iPad (3 TV, 4 watch, 6 Mac, 7 Vision); an array, or a
    /// single number. Nil when the key is absent.
    public var deviceFamilies: [Int]?
    /// `LSRequiresIPhoneOS`: an iOS app; without `UIDeviceFamily`, an iPhone app.
    public var requiresIPhoneOS = false

    public init() {}

    /// Read from a property list's bytes (XML or binary); what it lacks, or cannot be read,
    /// keeps its default.
    public init(plist bytes: [UInt8]) {
        self.init(info: PropertyList.dictionary(in: bytes) ?? [:])
    }

    /// Read from a property list's root dictionary.
    public init(info root: [String: PropertyList.Value]) {
        if case .string(let region)? = root["CFBundleDevelopmentRegion"], !region.isEmpty { developmentRegion = region }
        localizations = root["CFBundleLocalizations"]?.strings ?? []
        allowsMixedLocalizations = root["CFBundleAllowMixedLocalizations"]?.boolValue ?? false
        followsParent = (root["CFBundleFollowParentLocalization"]?.boolValue ?? false) || root["NSExtension"] != nil
        if let family = root["UIDeviceFamily"] {
            let values: [PropertyList.Value]
            if case .array(let array) = family { values = array } else { values = [family] }
            deviceFamilies = values.compactMap { value in
                switch value {
                case .integer(let number): return number
                case .string(let text): return Int(text)
                default: return nil
                }
            }
        }
        requiresIPhoneOS = root["LSRequiresIPhoneOS"]?.boolValue ?? false
    }
}
