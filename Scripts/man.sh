#!/usr/bin/env bash
# Writes docs/proxybundle.8: the commands and options as swift-argument-parser's manual
# generator gives them (from the command definitions), made into clean mdoc, followed by the
# hand-written sections of docs/man/sections.mdoc. Run it after changing a command's help;
# the tests check that the page names every command and option and renders without warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

swift package --allow-writing-to-package-directory generate-manual --section 8 >/dev/null
generated=.build/plugins/GenerateManual/outputs/proxybundle/proxybundle.8
[ -f "$generated" ] || { echo "man.sh: the generator wrote no $generated" >&2; exit 1; }

# blank lines become paragraph breaks; indented example lines become literal blocks; the
# generator's empty EXIT STATUS gives way to the hand-written sections
awk '
  /^\.Sh "EXIT STATUS"/ { exit }
  /^  / { if (!literal) { print ".Bd -literal -offset indent"; literal = 1 } sub(/^  /, ""); print; next }
  literal { print ".Ed"; literal = 0 }
  /^$/ { print ".Pp"; next }
  { print }
  END { if (literal) print ".Ed" }
' "$generated" > docs/proxybundle.8.tmp
cat docs/man/sections.mdoc >> docs/proxybundle.8.tmp
# the header and footer name the program and its release, not the generator's default (BSD)
version=$(sed -n 's/.*static let number = "\(.*\)"/\1/p' Sources/ProxyBundleCore/Version.swift)
[ -n "$version" ] || { echo "man.sh: no version in Sources/ProxyBundleCore/Version.swift" >&2; exit 1; }
# (groff 1.22 puts its default operating system, BSD, before the volume's name in the header)
sed -i -e "s/^\.Os\$/.Os proxybundle $version/" \
  -e 's/^\.Dt /.ds doc-volume-operating-system proxybundle\n.Dt /' docs/proxybundle.8.tmp
mv docs/proxybundle.8.tmp docs/proxybundle.8
echo "wrote docs/proxybundle.8"
