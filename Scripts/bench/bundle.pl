#!/usr/bin/perl
# Generates the bundle `Scripts/bench/resources.sh` times resolve and check on: an iOS app's
# resources of about 13,700 entries (58 localizations, images at three scales, bundles inside
# it: resource bundles two levels deep, a framework, an extension) and a 790-file patch that
# touches images, localized strings and plain files, in the main bundle and the nested ones.
#   bundle.pl OUTDIR
# Deterministic (a fixed-seed LCG); only core Perl. Writes OUTDIR/main and OUTDIR/patch.
use strict;
use warnings;
use File::Path qw(make_path);

my ($out) = @ARGV;
die "usage: bundle.pl OUTDIR\n" unless defined $out;
my $seed = 20261127;
sub rint { $seed = ($seed * 1103515245 + 12345) & 0x7fffffff; return $seed % $_[0]; }

sub put {
    my ($path, $text) = @_;
    (my $dir = $path) =~ s{/[^/]*$}{};
    make_path($dir);
    open(my $fh, '>', $path) or die "$path: $!\n";
    print $fh $text;
    close $fh;
}

my @languages = qw(Base en en_GB en_AU fr fr_CA de de-AT es es-419 it ja ko zh-Hans zh-Hant zh_HK
    pt-BR pt-PT ru ar he iw id in nl sv da fi nb pl cs sk hu ro hr sl bg uk el tr th vi ms hi
    bn ta te mr gu kn ml ca eu gl is lt lv et fa ur sw);
my $main = "$out/main";
put("$main/Info.plist", "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\"><dict>\n"
    . "<key>CFBundleDevelopmentRegion</key><string>en</string>\n</dict></plist>\n");
for my $language (@languages) {
    put("$main/$language.lproj/Localizable.strings", "\"k\" = \"$language\";\n");
    put("$main/$language.lproj/Screen$_.strings", "\"s\" = \"$_\";\n") for 1 .. 58;
}
for my $n (1 .. 2950) {
    my $dir = "Images/Set" . ($n % 40);
    put("$main/$dir/image$n.png", "") for 1;
    put("$main/$dir/image$n\@2x.png", "");
    put("$main/$dir/image$n\@3x.png", "");
}
put("$main/Data/record$_.json", "{}") for 1 .. 500;
# bundles inside the app, as apps carry their libraries' resources: seven resource bundles, each
# with one inside it, a framework and an app extension, each localized in 12 of the app's
# languages (the extension in 12 others too), with device twins and images
my @kit_languages = @languages[1 .. 12];
sub plist { "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\"><dict>\n$_[0]</dict></plist>\n" }
for my $k (1 .. 7) {
    my $kit = "$main/Kit$k.bundle";
    for my $language (@kit_languages) {
        put("$kit/$language.lproj/Kit.strings", "");
        put("$kit/Inner.bundle/$language.lproj/Inner.strings", "");
    }
    put("$kit/$_", "") for qw(layout.json layout~ipad.json Inner.bundle/View.storyboardc/Info.plist
        Inner.bundle/View~ipad.storyboardc/Info.plist);
}
my $framework = "$main/Frameworks/Kit.framework";
put("$framework/Info.plist", plist("<key>CFBundleDevelopmentRegion</key><string>en</string>\n"));
for my $language (@kit_languages) {
    put("$framework/$language.lproj/Framework$_.strings", "") for 1 .. 10;
}
for my $n (1 .. 20) {
    put("$framework/Images/art$n$_.png", "") for ("", "\@2x", "\@3x");
}
my $appex = "$main/PlugIns/Share.appex";
put("$appex/Info.plist", plist("<key>CFBundleDevelopmentRegion</key><string>en</string>\n"
    . "<key>NSExtension</key><dict><key>NSExtensionPointIdentifier</key><string>com.apple.share-services</string></dict>\n"));
for my $language (@kit_languages, @languages[30 .. 41]) {
    put("$appex/$language.lproj/Share$_.strings", "") for 1 .. 3;
}

my $patch = "$out/patch";
# 700 distinct files: the strides are prime to the counts, so no pick repeats
my $offset = rint(2950);
for my $n (1 .. 300) {
    my $pick = 1 + ($offset + $n * 7) % 2950;
    put("$patch/Images/Set" . ($pick % 40) . "/image$pick\@2x.png", "patched");
}
for my $n (0 .. 199) {
    put("$patch/$languages[1 + $n % $#languages].lproj/Screen" . (1 + int($n / $#languages)) . ".strings",
        "\"s\" = \"patched\";\n");
}
put("$patch/Data/record" . (1 + ($_ * 3) % 500) . ".json", "{\"patched\":true}") for 1 .. 200;
# and 100 in the bundles inside the app: global files over localized ones, localized strings,
# a compiled storyboard whose ~ipad twin the main bundle has, images at one scale
put("$patch/Kit$_.bundle/Kit.strings", "\"k\" = \"patched\";\n") for 1 .. 3;
put("$patch/Kit$_.bundle/Inner.bundle/fr.lproj/Inner.strings", "\"i\" = \"patched\";\n") for 1 .. 7;
put("$patch/Kit1.bundle/Inner.bundle/View.storyboardc/Info.plist", "patched");
for my $language (@kit_languages) {
    put("$patch/Frameworks/Kit.framework/$language.lproj/Framework$_.strings", "\"f\" = \"patched\";\n") for 1 .. 3;
    put("$patch/PlugIns/Share.appex/$language.lproj/Share$_.strings", "\"s\" = \"patched\";\n") for 1 .. 2;
}
put("$patch/Frameworks/Kit.framework/Images/art$_\@2x.png", "patched") for 1 .. 20;
