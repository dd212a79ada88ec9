#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes the committed seeds of the fuzz targets (Fuzz/TARGET/corpus) from the shapes the
# tests use: the tar archives of the layer tests (CraftedTar), the image layouts of the
# delivery tests, the property lists of PropertyListTests (plistlib), the catalogs of
# AssetCatalogTests (CatalogWriter), the names of CaseFoldTests, the control-file writes of
# ControlFileTests and RemountTests. Run it again when those change; Scripts/fuzz.sh only reads them.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
python3 Fuzz/Seeds/make.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
swiftc -O Tests/CatalogWriter/CatalogWriter.swift Fuzz/Seeds/catalogs/main.swift -o "$work/catalogs"
rm -rf Fuzz/assets-car/corpus && mkdir -p Fuzz/assets-car/corpus
"$work/catalogs" Fuzz/assets-car/corpus
