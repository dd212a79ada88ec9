#!/usr/bin/env python3
"""Writes Sources/ProxyBundleCore/Nodes/CaseFoldTable.swift from Unicode's own data (Debian's
unicode-data package): the canonical combining classes and full canonical decompositions of
UnicodeData.txt, the common and full case foldings (statuses C and F) of CaseFolding.txt, each
folding already decomposed, and the Default_Ignorable_Code_Points of DerivedCoreProperties.txt,
which fold to nothing. `CaseFold` reads the tables; the daemon reads no file.

The tables are those of Unicode 12.1, what ext4's and tmpfs's casefold use (the kernel's
fs/unicode, UTF8_LATEST), made from the newer data Debian ships by keeping only the code
points DerivedAge.txt dates 12.1 or earlier. That is exact for the mappings: Unicode's
stability policies fix an assigned character's decomposition, combining class and case
folding for good. Default_Ignorable_Code_Point is not covered by a policy: it is kept for
the characters of 12.1 and for code points still unassigned, and the differential test
against e2fsprogs' copy of the kernel's tables (CaseFoldOracleTests) checks every code point.

    Scripts/casefold-table.py [/usr/share/unicode]
"""
import os
import sys

source = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources", "ProxyBundleCore", "Nodes",
                      "CaseFoldTable.swift")


def hexes(text):
    return [int(word, 16) for word in text.split()]


KEPT = (12, 1)  # the Unicode version of ext4's and tmpfs's casefold


def ranges_of(name, wanted=None):
    """(first, last, value) of each `first..last ; value` line of a UCD property file."""
    with open(os.path.join(source, name), encoding="utf-8") as data:
        for line in data:
            fields = [field.strip() for field in line.split("#")[0].split(";")]
            if len(fields) < 2 or not fields[0]:
                continue
            if wanted is not None and fields[1] != wanted:
                continue
            first, _, last = fields[0].partition("..")
            yield int(first, 16), int(last or first, 16), fields[1]


assigned = set()  # by KEPT
ever_assigned = set()  # by the data's own version
for first, last, age in ranges_of("DerivedAge.txt"):
    major, minor = (int(part) for part in age.split("."))
    for code in range(first, last + 1):
        ever_assigned.add(code)
        if (major, minor) <= KEPT:
            assigned.add(code)
ignorable = set()
for first, last, _ in ranges_of("DerivedCoreProperties.txt", "Default_Ignorable_Code_Point"):
    for code in range(first, last + 1):
        if code in assigned or code not in ever_assigned:
            ignorable.add(code)


classes = {}
decompositions = {}
with open(os.path.join(source, "UnicodeData.txt"), encoding="ascii") as data:
    for line in data:
        fields = line.split(";")
        code = int(fields[0], 16)
        if code not in assigned:
            continue
        if int(fields[3]) != 0:
            classes[code] = int(fields[3])
        if fields[5] and not fields[5].startswith("<"):
            decompositions[code] = hexes(fields[5])
version = None
foldings = {}
with open(os.path.join(source, "CaseFolding.txt"), encoding="utf-8") as data:
    for line in data:
        if version is None and line.startswith("# CaseFolding-"):
            version = line[len("# CaseFolding-"):].split(".txt")[0]
        fields = [field.strip() for field in line.split("#")[0].split(";")]
        if len(fields) >= 3 and fields[1] in ("C", "F") and int(fields[0], 16) in assigned:
            foldings[int(fields[0], 16)] = hexes(fields[2])


def decomposed(code):
    """The full canonical decomposition of one code point (not reordered: one code point's
    decomposition is in canonical order already); nothing for an ignorable one."""
    if code in ignorable:
        return []
    if 0xAC00 <= code <= 0xD7A3:
        index = code - 0xAC00
        parts = [0x1100 + index // 588, 0x1161 + (index % 588) // 28]
        return parts + ([0x11A7 + index % 28] if index % 28 else [])
    if code not in decompositions:
        return [code]
    return [part for first in decompositions[code] for part in decomposed(first)]


def entries(mapping):
    """`code:value,value;` for each key in order, lines of about 100 characters."""
    items = ["%X:%s;" % (code, ",".join("%X" % v for v in values)) for code, values in sorted(mapping.items())]
    lines, line = [], ""
    for item in items:
        if len(line) + len(item) > 100:
            lines.append(line)
            line = ""
        line += item
    return "\n".join(lines + [line])


full = {code: decomposed(code) for code in decompositions}
folded = {code: [part for value in values for part in decomposed(value)] for code, values in foldings.items()}
ranges = []  # consecutive code points of one class
for code in sorted(classes):
    if ranges and ranges[-1][1] == code - 1 and ranges[-1][2] == classes[code]:
        ranges[-1][1] = code
    else:
        ranges.append([code, code, classes[code]])
class_text = {start: [end, value] for start, end, value in ranges}
ignorable_ranges = []
for code in sorted(ignorable):
    if ignorable_ranges and ignorable_ranges[-1][1] == code - 1:
        ignorable_ranges[-1][1] = code
    else:
        ignorable_ranges.append([code, code])
ignorable_text = {start: [end] for start, end in ignorable_ranges}
kept = "%d.%d.0" % KEPT

with open(target, "w", encoding="ascii") as out:
    out.write("// Generated by Scripts/casefold-table.py: Unicode %s, as the data of Unicode %s (UnicodeData.txt,\n" % (kept, version))
    out.write("// CaseFolding.txt, DerivedCoreProperties.txt) has it for the code points DerivedAge.txt dates %s\n" % kept)
    out.write("// or earlier. Do not edit; run the script again.\n\n")
    out.write("/// The tables `CaseFold` decodes once: hexadecimal `code:value,value;` entries in code order.\n")
    out.write("enum CaseFoldTable {\n")
    out.write("    /// The Unicode version the tables stop at, ext4's (fuzz-casefold skips names with later\n")
    out.write("    /// scalars; CaseFoldOracleTests pins it).\n")
    out.write("    static let unicodeVersion = \"%s\"\n\n" % kept)
    out.write("    /// Default_Ignorable_Code_Points, which fold to nothing: `first:last;`.\n")
    out.write("    static let ignorables = \"\"\"\n%s\n\"\"\"\n\n" % entries(ignorable_text))
    out.write("    /// Canonical combining classes other than 0: `first:last,class;`.\n")
    out.write("    static let combiningClasses = \"\"\"\n%s\n\"\"\"\n\n" % entries(class_text))
    out.write("    /// Full canonical decompositions (Hangul syllables are computed instead).\n")
    out.write("    static let decompositions = \"\"\"\n%s\n\"\"\"\n\n" % entries(full))
    out.write("    /// Full case foldings (statuses C and F), each decomposed.\n")
    out.write("    static let foldings = \"\"\"\n%s\n\"\"\"\n" % entries(folded))
    out.write("}\n")
print("wrote %s: Unicode %s, %d classes in %d ranges, %d decompositions, %d foldings, %d ignorables in %d ranges" %
      (os.path.relpath(target), kept, len(classes), len(ranges), len(full), len(folded), len(ignorable),
       len(ignorable_ranges)))
