#if canImport(Glibc)
import Glibc
#endif
import CFuseShim
import ProxyBundleCore

extension Errno {
    /// The error's symbolic name, as logs give it (`ENOTEMPTY`, not "Directory not empty":
    /// what an operator searches for, and the same in every locale); `errno N` for a number
    /// glibc has no name for.
    public var name: String {
        guard let text = pb_errno_name(code) else { return "errno \(code)" }
        return String(cString: text)
    }
}
