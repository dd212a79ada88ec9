/// What `proxybundle --version`, `status --json` and `.stats` say of this build.
public enum Version {
    /// The release number (the Debian package's version too).
    public static let number = "0.9.0"
    /// The git commit it is built from (`unknown` outside a checkout; `-dirty` with changes).
    public static let commit = buildCommit
}
