/// The device a bundle is made for, which lookups take unless told (`IdiomChoice.bundle`).
extension ResourceBundle {
    /// The idioms of the devices the app holding this bundle runs on, as its main bundle's
    /// Info.plist and layout say: `[]` for a macOS bundle (`Contents/`: no `~iphone`/`~ipad`
    /// variant ever loads), and for an app of other devices only (`UIDeviceFamily` 3 TV, 4
    /// watch...); `[.phone]`, `[.pad]` or both from `UIDeviceFamily` (1 iPhone, 2 iPad; an array
    /// or one number); `[.phone]` for an app that sets `LSRequiresIPhoneOS` without
    /// `UIDeviceFamily` (iOS takes an app without that key for an iPhone app). Nil when nothing
    /// says: then the bundle's own Info.plist is read, and when it says nothing either, no idiom
    /// is assumed. An iPhone app runs as one on an iPad too, so phone-only means phone everywhere.
    public var madeFor: [Device.Idiom]? {
        if let main, let idioms = main.ownDevices { return idioms }
        return ownDevices
    }

    /// What this bundle's own layout and Info.plist say of its devices (see `madeFor`).
    private var ownDevices: [Device.Idiom]? {
        if isMacOS { return [] }
        if let families = info.deviceFamilies, !families.isEmpty {
            return [(1, Device.Idiom.phone), (2, .pad)].filter { families.contains($0.0) }.map(\.1)
        }
        return info.requiresIPhoneOS ? [.phone] : nil
    }

    /// The idiom a lookup takes: the one given, or for `.bundle` the one the bundle is made for
    /// (see `assumesIdiom` for an app made for both).
    public func idiom(for choice: IdiomChoice) -> Device.Idiom? {
        switch choice {
        case .idiom(let idiom): return idiom
        case .none: return nil
        case .bundle: return madeFor?.first
        }
    }

    /// Whether `idiom(for: .bundle)` picks one of several idioms the app is made for (a phone,
    /// of an app for phones and pads): a caller may want to say so.
    public var assumesIdiom: Bool {
        (madeFor?.count ?? 0) > 1
    }
}
