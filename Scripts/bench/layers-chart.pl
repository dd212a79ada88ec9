#!/usr/bin/perl
# Draws layers.sh's figures as an SVG line chart: for each patch count (log scale), the time of
# looking up existing names, missing names, and a cold walk per entry, each as a ratio to the
# same workload over one patch in the same run (1 = no cost from the patch count), with the
# issue's 1.5x target marked.
#   layers-chart.pl layers.tsv > chart.svg
# layers.tsv: one line per count: patches, existing ratio, missing ratio, walk ratio.
use strict;
use warnings;

my $file = shift or die "usage: layers-chart.pl layers.tsv\n";
open my $in, '<', $file or die "layers-chart.pl: $file: $!\n";
my @rows = map { chomp; [split /\t/] } grep { /\S/ } <$in>;
die "layers-chart.pl: no rows in $file\n" unless @rows;
my @series = (['existing names', 1, '#1f77b4'], ['missing names', 2, '#2ca02c'], ['cold walk, per entry', 3, '#d62728']);
my $max = 2;
for my $row (@rows) { for my $s (@series) { $max = $row->[$s->[1]] if $row->[$s->[1]] > $max } }
$max = int($max + 0.999);
$max = 5 if $max > 5;  # higher points are drawn at the top and labelled
my ($left, $top, $w, $h) = (60, 40, 520, 260);
my ($lo, $hi) = (0, 4);  # 10^0 .. 10^4 patches
my $x = sub { $left + ($_[0] <= 0 ? 0 : (log($_[0]) / log(10) - $lo) / ($hi - $lo)) * $w };
my $y = sub { $top + $h - ($_[0] > $max ? $max : $_[0]) / $max * $h };
print qq(<svg xmlns="http://www.w3.org/2000/svg" width="760" height="360" font-family="sans-serif" font-size="12">\n);
print qq(<text x="$left" y="20" font-size="14">Many patches against one, same files, same run (ratio; lower is better)</text>\n);
for my $e ($lo .. $hi) {
    my $px = $x->(10**$e);
    print qq(<line x1="$px" y1="$top" x2="$px" y2="@{[$top + $h]}" stroke="#ddd"/>\n);
    print qq(<text x="$px" y="@{[$top + $h + 16]}" text-anchor="middle">@{[10**$e]}</text>\n);
}
for my $r (0 .. $max) {
    my $py = $y->($r);
    print qq(<line x1="$left" y1="$py" x2="@{[$left + $w]}" y2="$py" stroke="#ddd"/>\n);
    print qq(<text x="@{[$left - 6]}" y="@{[$py + 4]}" text-anchor="end">${r}x</text>\n);
}
my $target = $y->(1.5);
print qq(<line x1="$left" y1="$target" x2="@{[$left + $w]}" y2="$target" stroke="#888" stroke-dasharray="6,4"/>\n);
print qq(<text x="@{[$left + $w + 6]}" y="@{[$target + 4]}" fill="#888">target 1.5x</text>\n);
print qq(<text x="@{[$left + $w / 2]}" y="@{[$top + $h + 34]}" text-anchor="middle">patches</text>\n);
my $ly = $top + 10;
for my $s (@series) {
    my ($name, $col, $colour) = @$s;
    my $points = join ' ', map { sprintf '%.1f,%.1f', $x->($_->[0]), $y->($_->[$col]) } @rows;
    print qq(<polyline points="$points" fill="none" stroke="$colour" stroke-width="2"/>\n);
    for my $row (@rows) {
        printf qq(<circle cx="%.1f" cy="%.1f" r="3" fill="$colour"/>\n), $x->($row->[0]), $y->($row->[$col]);
        printf qq(<text x="%.1f" y="%.1f" fill="$colour" text-anchor="end">%sx</text>\n), $x->($row->[0]) - 5,
            $y->($row->[$col]) + 12, $row->[$col] if $row->[$col] > $max;
    }
    print qq(<line x1="@{[$left + $w + 6]}" y1="$ly" x2="@{[$left + $w + 26]}" y2="$ly" stroke="$colour" stroke-width="2"/>\n);
    print qq(<text x="@{[$left + $w + 30]}" y="@{[$ly + 4]}">$name</text>\n);
    $ly += 18;
}
print "</svg>\n";
