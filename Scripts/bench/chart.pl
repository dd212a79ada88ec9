#!/usr/bin/perl
# Draws bench.sh's results as an SVG bar chart: for each workload, one bar per implementation,
# its median time as a ratio to kernel overlayfs in the same run (1 = as fast as the kernel;
# shorter is faster), with proxybundle's target marked.
#   chart.pl results.json > chart.svg
# Workloads without a kernel figure (a run without kernel overlayfs) are listed as such.
use strict;
use warnings;
use JSON::PP;

my $file = shift or die "usage: chart.pl results.json\n";
open my $in, '<', $file or die "chart.pl: $file: $!\n";
my $results = decode_json(do { local $/; <$in> });
my @impls = grep { $_ ne 'kernel' } @{ $results->{implementations} };
my @rows = @{ $results->{workloads} };
my %colour = ('proxybundle' => '#1f77b4', 'fuse-overlayfs' => '#ff7f0e', 'unionfs-fuse' => '#2ca02c',
              'mergerfs' => '#9467bd');

my ($left, $barh, $gap, $width) = (300, 12, 14, 440);
my $max = 1.5;
for my $row (@rows) {
    for my $impl (@impls) {
        my $ratio = $row->{results}{$impl}{ratio_to_kernel};
        $max = $ratio if defined $ratio && $ratio > $max;
    }
}
$max = 5 if $max > 5;  # longer bars are cut and labelled
my $scale = $width / $max;
my $rowh = @impls * $barh + $gap;
my $height = 60 + @rows * $rowh + 30;
my $total = $left + $width + 120;

sub esc { my $s = shift; $s =~ s/&/&amp;/g; $s =~ s/</&lt;/g; $s =~ s/>/&gt;/g; $s =~ s/"/&quot;/g; return $s }

print qq{<svg xmlns="http://www.w3.org/2000/svg" width="$total" height="$height" font-family="sans-serif" font-size="11">\n};
print qq{<rect width="100%" height="100%" fill="white"/>\n};
printf qq{<text x="10" y="18" font-size="13" font-weight="bold">Time as a ratio to kernel overlayfs (shorter is faster), %s</text>\n},
    esc("$results->{date}, kernel $results->{kernel}, scale $results->{scale}");
my $x = $left;
for my $impl (@impls) {
    printf qq{<rect x="%d" y="28" width="10" height="10" fill="%s"/><text x="%d" y="37">%s</text>\n},
        $x, $colour{$impl} // '#7f7f7f', $x + 14, esc($impl);
    $x += 14 + 7 * length($impl) + 16;
}
my $y = 50;
for my $row (@rows) {
    printf qq{<text x="%d" y="%d" text-anchor="end">%s</text>\n}, $left - 8, $y + $rowh / 2, esc($row->{description} // $row->{name});
    my $i = 0;
    for my $impl (@impls) {
        my $ratio = $row->{results}{$impl}{ratio_to_kernel};
        my $by = $y + $i * $barh;
        if (defined $ratio) {
            my $w = ($ratio > $max ? $max : $ratio) * $scale;
            printf qq{<rect class="bar" data-impl="%s" data-workload="%s" x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>\n},
                esc($impl), esc($row->{name}), $left, $by, $w, $barh - 2, $colour{$impl} // '#7f7f7f';
            printf qq{<text x="%.1f" y="%d">%.2f×</text>\n}, $left + $w + 4, $by + $barh - 3, $ratio;
        } else {
            my $why = exists $row->{results}{$impl} ? 'no kernel figure' : 'not run';
            printf qq{<text x="%d" y="%d" fill="#999">%s: %s</text>\n}, $left + 4, $by + $barh - 3, esc($impl), $why;
        }
        $i++;
    }
    if (defined $row->{target_ratio}) {
        my $tx = $left + ($row->{target_ratio} > $max ? $max : $row->{target_ratio}) * $scale;
        printf qq{<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d62728" stroke-dasharray="3,2"/>\n},
            $tx, $y - 2, $tx, $y + @impls * $barh;
    }
    $y += $rowh;
}
my $one = $left + $scale;
printf qq{<line x1="%.1f" y1="46" x2="%.1f" y2="%d" stroke="black"/>\n}, $one, $one, $y;
printf qq{<text x="%.1f" y="%d" text-anchor="middle">1× = kernel overlayfs</text>\n}, $one, $y + 14;
printf qq{<text x="%d" y="%d" fill="#d62728">- - proxybundle's target</text>\n}, $left + $width - 60, $y + 14;
print "</svg>\n";
