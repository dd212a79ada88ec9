#!/usr/bin/perl
# Generates the bundle `Scripts/bench/resources.sh` times resolve and check on: an iOS app's
# resources of about 13,000 entries (58 localizations, images at three scales, nested bundles)
# and a 700-file patch that touches images, localized strings and plain files.
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
put("$main/Kit$_.bundle/en.lproj/Kit.strings", "") for 1 .. 7;

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
