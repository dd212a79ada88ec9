// The name folding of `-o casefold` (`CaseFold.key`: its UTF-8 decoder, NFD, full case
// folding), on names of any bytes. Its invariants, checked against the Swift standard
// library's own Unicode data where they need an outside view (for characters the tables'
// Unicode version has, as the stdlib's may be newer):
// - a name that is not UTF-8 (as the stdlib validates it) is its own key, unless it has a
//   stray continuation byte ext4 takes for a character (CaseFold.decode), and its key is no
//   UTF-8; a UTF-8 name's key is UTF-8;
// - folding is idempotent: key(key(x)) == key(x), and a name is equal to its key; not for a
//   name with an ignorable code point, whose key may hold marks ext4 left apart around it
//   and that fold again into another order (ext4's utf8_casefold of its own output is then
//   another name, too: CaseFoldOracleTests); such a key, holding no ignorable, is the one
//   checked;
// - a key has nothing left to fold (no scalar that changes when case folded) and its marks
//   are in canonical order;
// - lowercasing does not change a key: key(lowercased(x)) == key(x);
// - canonically equivalent names (the stdlib's `==` on strings) have one key; a name with two
//   neighbouring marks of different combining classes swapped is one of them. Not where ext4
//   folds otherwise (CaseFold.fold, checked against its tables by CaseFoldOracleTests): a
//   name with U+0345, which becomes the letter ι before marks are ordered, or with an
//   ignorable code point, which keeps the marks on either side apart (nor, for the latter,
//   the canonical order of a key's marks);
// - `equal` and `SpellingTable` (a directory's names by key, of 255 bytes at most) agree with
//   `key`.
// An input is one name, or two names around a byte 0xFF (never in UTF-8), compared.
import FuzzSupport
@testable import ProxyBundleCore

let tablesVersion: (Int, Int) = {
    let parts = CaseFoldTable.unicodeVersion.split(separator: ".").compactMap { Int($0) }
    return (parts[0], parts.count > 1 ? parts[1] : 0)
}()

/// Whether the tables know every scalar of `text` (assigned in their Unicode version or before).
func known(_ text: String) -> Bool {
    text.unicodeScalars.allSatisfy { scalar in
        guard let age = scalar.properties.age else { return false }
        return (age.major, age.minor) <= tablesVersion
    }
}

/// Whether ext4 folds `text` other than the canonical caseless form does (see above).
func foldsAsExt4Only(_ text: String) -> Bool {
    text.unicodeScalars.contains { $0.value == 0x345 || $0.properties.isDefaultIgnorableCodePoint }
}

/// Whether `name`, as `CaseFold` decodes it, has a code point its tables fold to nothing.
func hasIgnorable(_ name: [UInt8]) -> Bool {
    CaseFold.decode(name)?.contains { CaseFoldTables.shared.isIgnorable($0) } ?? false
}

func check(_ name: [UInt8]) {
    let key = CaseFold.key(name)
    let stable = hasIgnorable(name) ? CaseFold.key(key) : key
    guard !hasIgnorable(key) else { Fuzzing.fail("the key of \(name) keeps an ignorable code point") }
    guard CaseFold.key(stable) == stable else { Fuzzing.fail("key(key(x)) != key(x) for \(name)") }
    guard hasIgnorable(name) || CaseFold.equal(name, key) else { Fuzzing.fail("a name is not equal to its key: \(name)") }
    // no directory holds a name over 255 bytes (NAME_MAX), and a spelling table leaves one out
    if name.count <= 255 {
        var table = SpellingTable()
        table.add(name)
        guard table.first(of: name) == name else { Fuzzing.fail("a spelling table does not find its own name: \(name)") }
    }
    guard let text = String(validating: name, as: UTF8.self) else {
        // ext4's tables take a stray continuation byte after the first for a character of its
        // own (CaseFold.decode): such a name folds around it; any other is its own key. Either
        // way the key is no UTF-8, so it never meets a valid name's
        guard CaseFold.decode(name) != nil || key == name else { Fuzzing.fail("a name that is not UTF-8 has another key: \(name)") }
        guard String(validating: key, as: UTF8.self) == nil else { Fuzzing.fail("the key of a name that is not UTF-8 is UTF-8: \(name)") }
        return
    }
    guard let folded = String(validating: key, as: UTF8.self) else { Fuzzing.fail("the key of a UTF-8 name is not UTF-8: \(name)") }
    guard known(text) else { return }
    var previousClass: UInt8 = 0
    for scalar in folded.unicodeScalars {
        if scalar.properties.changesWhenCaseFolded { Fuzzing.fail("the key of \(name) keeps U+\(String(scalar.value, radix: 16)), which folds") }
        let combining = scalar.properties.canonicalCombiningClass.rawValue
        if combining != 0 && combining < previousClass && !foldsAsExt4Only(text) { Fuzzing.fail("the key of \(name) has marks out of canonical order") }
        previousClass = combining
    }
    let lowered = text.lowercased()
    if known(lowered), CaseFold.key(Array(lowered.utf8)) != key {
        Fuzzing.fail("lowercasing changes the key of \(name)")
    }
    // two neighbouring marks of different classes, swapped: canonically equivalent
    var scalars = Array(text.unicodeScalars)
    for index in scalars.indices.dropLast() {
        let a = scalars[index].properties.canonicalCombiningClass.rawValue
        let b = scalars[index + 1].properties.canonicalCombiningClass.rawValue
        if a != 0 && b != 0 && a != b {
            scalars.swapAt(index, index + 1)
            var swapped = String.UnicodeScalarView()
            swapped.append(contentsOf: scalars)
            compare(text, String(swapped))
            scalars.swapAt(index, index + 1)
            break
        }
    }
}

/// Canonically equivalent names the tables know have one key.
func compare(_ a: String, _ b: String) {
    guard a == b, known(a), known(b), !foldsAsExt4Only(a), !foldsAsExt4Only(b) else { return }
    guard CaseFold.key(Array(a.utf8)) == CaseFold.key(Array(b.utf8)) else {
        Fuzzing.fail("canonically equivalent names have different keys: \(Array(a.utf8)) and \(Array(b.utf8))")
    }
}

Fuzzing.run { data in
    check(data)
    guard let split = data.firstIndex(of: 0xFF) else { return }
    let a = Array(data[..<split]), b = Array(data[(split + 1)...])
    check(a)
    check(b)
    guard CaseFold.equal(a, b) == (CaseFold.key(a) == CaseFold.key(b)) else { Fuzzing.fail("equal disagrees with key") }
    if a.count <= 255 {
        var table = SpellingTable()
        table.add(a)
        guard (table.first(of: b) != nil) == (CaseFold.key(a) == CaseFold.key(b)) else { Fuzzing.fail("a spelling table disagrees with key") }
    }
    if let x = String(validating: a, as: UTF8.self), let y = String(validating: b, as: UTF8.self) { compare(x, y) }
}
