#!/usr/bin/perl
# Generates bench.sh's dataset: a main bundle and a substitution shaped like a large app bundle.
#   generate.pl OUTDIR SCALE
# Deterministic: a fixed-seed 31-bit LCG drives every choice and every byte, so the same scale
# always gives the same tree and the same content. Only core Perl (Debian's perl-base).
# Writes OUTDIR/main, OUTDIR/sub, and OUTDIR/meta.env + OUTDIR/copyup.list describing them; for
# the stacked layers also OUTDIR/stack/patch1, OUTDIR/stack/patch2, OUTDIR/stack-view.tsv and
# OUTDIR/stack-copyup.list.
use strict;
use warnings;

my ($out, $scale) = @ARGV;
die "usage: generate.pl OUTDIR SCALE\n" unless defined $scale && $scale > 0;

my $seed = 20240905;
sub rnd { $seed = ($seed * 1103515245 + 12345) & 0x7fffffff; return $seed / 2147483648; }
sub rint { my ($n) = @_; return int(rnd() * $n); }
sub pick { my ($list) = @_; return $list->[rint(scalar @$list)]; }
sub logsize { my ($lo, $hi) = @_; return int(exp(log($lo) + rnd() * (log($hi) - log($lo)))); }
sub atleast { my ($min, $v) = @_; $v = int($v + 0.5); return $v < $min ? $min : $v; }

my $ndirs  = atleast(12, 1000 * $scale);
my $nfiles = atleast(60, 20000 * $scale);
my $nhuge  = atleast(100, 20000 * $scale);
my $bigmib = atleast(4, 1024 * $scale);
my $ncopyup = atleast(5, 500 * $scale);

# A 1 MiB pool of pseudo-random bytes; file contents are slices of it behind a unique header.
my @words;
push @words, int(rnd() * 4294967296) for 1 .. 262144;
my $pool = pack('V*', @words);
$pool .= $pool;    # so any slice up to 1 MiB can start anywhere in the first copy
my $poolsize = 1 << 20;

sub content {
    my ($path, $variant, $size, $ext) = @_;
    my $head = $ext eq 'png' ? "\x89PNG\r\n\x1a\n" : '';
    $head .= "$variant:$path\n";
    my $n = $size - length($head);
    $n = 0 if $n < 0;
    return $head . substr($pool, rint($poolsize), $n);
}

sub mkpath {
    my ($p) = @_;
    return if -d $p;
    my $parent = $p;
    $parent =~ s{/[^/]*$}{};
    mkpath($parent) if $parent ne $p && $parent ne '';
    mkdir $p or -d $p or die "mkdir $p: $!\n";
}

sub writefile {
    my ($p, $data) = @_;
    open(my $fh, '>:raw', $p) or die "open $p: $!\n";
    print $fh $data or die "write $p: $!\n";
    close $fh or die "close $p: $!\n";
}

my @langs = qw(Base en de fr ja es it nl pt pt-BR ru ko zh-Hans zh-Hant sv da fi nb pl tr cs hu
               el he ar th id ms vi uk ro sk hr ca hi en-GB en-AU fr-CA es-MX);
my @words2 = qw(Icons Assets Themes Artwork Sounds Toolbar Sidebar Inspector Templates Fonts
                Preferences Onboarding Export Import Widgets Panels Effects Brushes Stickers Media);
my @stems = qw(icon button background badge arrow toolbar cell header footer logo glyph symbol
               thumbnail preview splash banner cover frame mask shadow);

# Directories: kind is 'plain', 'lproj', 'bundle' (no files of its own but Info.plist) or fixed.
my $R = 'Contents/Resources';
my @dirs = ({ path => 'Contents', kind => 'fixed' }, { path => $R, kind => 'plain' },
            { path => "$R/Huge", kind => 'fixed' }, { path => "$R/Movies", kind => 'fixed' });
my %taken;
$taken{$_->{path}} = 1 for @dirs;
my @containers = (1);    # indexes of dirs that can get subdirectories
my $toplangs = $ndirs >= 60 ? 24 : 3;
for my $i (0 .. $toplangs - 1) {
    push @dirs, { path => "$R/$langs[$i].lproj", kind => 'lproj' };
    $taken{"$R/$langs[$i].lproj"} = 1;
}
my $serial = 0;
while (@dirs < $ndirs) {
    # the shallower of two random containers, so the tree stays about as deep as a real bundle
    my ($a, $b) = ($dirs[pick(\@containers)]{path}, $dirs[pick(\@containers)]{path});
    my $parent = ($a =~ tr{/}{}) <= ($b =~ tr{/}{}) ? $a : $b;
    my $r = rnd();
    if ($r < 0.12) {
        my $p = "$parent/" . pick(\@langs) . '.lproj';
        next if $taken{$p}++;
        push @dirs, { path => $p, kind => 'lproj' };
    } elsif ($r < 0.20) {
        my $b = "$parent/" . pick(\@words2) . ($serial++) . '.bundle';
        next if $taken{$b}++;
        push @dirs, { path => $b, kind => 'bundle' }, { path => "$b/Contents", kind => 'fixed' },
                    { path => "$b/Contents/Resources", kind => 'plain' };
        push @containers, $#dirs;
    } else {
        my $p = "$parent/" . pick(\@words2) . ($serial++);
        next if $taken{$p}++;
        push @dirs, { path => $p, kind => 'plain' };
        push @containers, $#dirs;
    }
}

# The opaque directory: an lproj whose main-bundle files the substitution hides entirely.
my @lprojdirs = grep { $dirs[$_]{kind} eq 'lproj' } 0 .. $#dirs;
my $opaque = $lprojdirs[-1];
my @filedirs = grep { $dirs[$_]{kind} eq 'plain' || $dirs[$_]{kind} eq 'lproj' } 0 .. $#dirs;

my %sizes = (png => [2048, 204800], strings => [256, 16384], nib => [1024, 65536],
             plist => [256, 8192], json => [128, 32768]);
sub filetype {
    my ($kind) = @_;
    my $r = rnd();
    return $r < 0.7 ? 'strings' : 'nib' if $kind eq 'lproj';
    return $r < 0.60 ? 'png' : $r < 0.72 ? 'plist' : $r < 0.86 ? 'json' : $r < 0.95 ? 'nib' : 'strings';
}

mkpath("$out/main");
mkpath("$out/sub");
mkpath("$out/main/$_->{path}") for @dirs;

my (@mainonly, @shadowed, @whiteouts, $newsample, @mainfiles);
my $entries = scalar(@dirs);    # visible entries below the root (dirs are all visible)
for my $d (@dirs) {
    next unless $d->{kind} eq 'bundle';
    writefile("$out/main/$d->{path}/Contents/Info.plist", content("$d->{path}/Contents/Info.plist", 'main', 600, 'plist'));
    $entries++;
}
writefile("$out/main/Contents/Info.plist", content('Contents/Info.plist', 'main', 2000, 'plist'));
writefile("$out/main/Contents/PkgInfo", "APPL????");
$entries += 2;

my $opaquemain = 0;
for my $i (0 .. $nfiles - 1) {
    my $d = $dirs[pick(\@filedirs)];
    my $ext = filetype($d->{kind});
    my $stem = $d->{kind} eq 'lproj' ? ($ext eq 'strings' ? 'Localizable' : 'View') : pick(\@stems);
    my $rel = "$d->{path}/$stem$i" . ($ext eq 'png' && rnd() < 0.3 ? '@2x' : '') . ".$ext";
    my $size = logsize(@{$sizes{$ext}});
    writefile("$out/main/$rel", content($rel, 'main', $size, $ext));
    push @mainfiles, [$rel, $ext];
    if ($d->{path} eq $dirs[$opaque]{path}) { $opaquemain++; next; }
    $entries++;
    my $r = rnd();
    if ($r < 0.10) {
        mkpath("$out/sub/$d->{path}");
        writefile("$out/sub/$rel", content($rel, 'sub', logsize(@{$sizes{$ext}}), $ext));
        push @shadowed, $rel;
    } elsif ($r < 0.102) {
        mkpath("$out/sub/$d->{path}");
        my $wh = $rel;
        $wh =~ s{([^/]+)$}{.wh.$1};
        writefile("$out/sub/$wh", '');
        push @whiteouts, $rel;
        $entries--;
    } else {
        push @mainonly, $rel;
    }
}

# New files in the substitution: 5%, a tenth of them in directories of their own.
my $nnew = atleast(3, $nfiles * 0.05);
for my $i (0 .. $nnew - 1) {
    my $d = $dirs[pick(\@filedirs)];
    next if $d->{path} eq $dirs[$opaque]{path};
    my $dir = $d->{path};
    if (rnd() < 0.1) {
        $dir .= "/Added$i";
        $entries++ unless -d "$out/sub/$dir";
    }
    my $ext = filetype($d->{kind});
    my $rel = "$dir/new$i.$ext";
    mkpath("$out/sub/$dir");
    writefile("$out/sub/$rel", content($rel, 'sub', logsize(@{$sizes{$ext}}), $ext));
    $newsample //= $rel;
    $entries++;
}

# The opaque directory keeps two substitution files and none of the main bundle's.
my $op = $dirs[$opaque]{path};
mkpath("$out/sub/$op");
writefile("$out/sub/$op/.wh..wh..opq", '');
writefile("$out/sub/$op/Localizable.strings", content("$op/Localizable.strings", 'sub', 900, 'strings'));
writefile("$out/sub/$op/Main.nib", content("$op/Main.nib", 'sub', 3000, 'nib'));
$entries += 2;

# One directory of $nhuge merged names: main has the first 60%, the substitution the last 60%.
my $hmain = int($nhuge * 0.6);
my $hsub = $nhuge - int($nhuge * 0.4);
mkpath("$out/sub/$R/Huge");
for my $i (0 .. $nhuge - 1) {
    my $name = sprintf('item%06d.dat', $i);
    writefile("$out/main/$R/Huge/$name", "main $i\n") if $i < $hmain;
    writefile("$out/sub/$R/Huge/$name", "sub $i\n") if $i >= $nhuge - $hsub;
}
$entries += $nhuge;

# The big file, main bundle only, written in 1 MiB blocks.
open(my $big, '>:raw', "$out/main/$R/Movies/intro.mov") or die "big: $!\n";
for my $b (0 .. $bigmib - 1) {
    my $block = "block $b\n" . substr($pool, ($b * 7919 * 64) % $poolsize, (1 << 20) - length("block $b\n"));
    print $big $block or die "big: $!\n";
}
close $big or die "big: $!\n";
$entries++;

# Deterministic picks for the workloads and the checks.
my @copyup;
my %used;
while (@copyup < $ncopyup && @copyup < @mainonly) {
    my $f = pick(\@mainonly);
    next if $used{$f}++;
    push @copyup, $f;
}
writefile("$out/copyup.list", join('', map { "$_\n" } @copyup));
my @deep = sort { ($b =~ tr{/}{}) <=> ($a =~ tr{/}{}) } @shadowed;
my @missingdirs = grep { -d "$out/sub/$_" } map { $_->{path} } @dirs[@filedirs];

# The stacked layers: the same main bundle and substitution with two read-only patches between
# them (top to bottom: sub, patch1, patch2, main). Of the main bundle's files, in the order they
# were generated, every 3rd gets another version in patch2 and every 5th one in patch1 (so do the
# merged directory's items, by number); patch1 whites out every 20th file from the 8th on (a
# third of them are in patch2 too). patch2 makes the directory with the most main-bundle files opaque,
# keeping its own versions there. Each patch adds files of its own (a tenth of them in
# directories of their own): the copy-up workload appends to those.
my %layerdir = (sub => "$out/sub", patch1 => "$out/stack/patch1", patch2 => "$out/stack/patch2", main => "$out/main");
mkpath($layerdir{$_}) for qw(patch1 patch2);
sub patchfile {
    my ($layer, $rel, $data) = @_;
    (my $dir = $rel) =~ s{/[^/]+$}{};
    mkpath("$layerdir{$layer}/$dir");
    writefile("$layerdir{$layer}/$rel", $data);
}
my %stackcount = (patch1 => 0, patch2 => 0, whiteouts => 0);
for my $i (0 .. $#mainfiles) {
    my ($rel, $ext) = @{$mainfiles[$i]};
    if ($i % 3 == 0) { patchfile('patch2', $rel, content($rel, 'patch2', logsize(@{$sizes{$ext}}), $ext)); $stackcount{patch2}++; }
    if ($i % 5 == 0) { patchfile('patch1', $rel, content($rel, 'patch1', logsize(@{$sizes{$ext}}), $ext)); $stackcount{patch1}++; }
    elsif ($i % 20 == 7) { (my $wh = $rel) =~ s{([^/]+)$}{.wh.$1}; patchfile('patch1', $wh, ''); $stackcount{whiteouts}++; }
}
for my $i (0 .. $hmain - 1) {
    my $name = sprintf("$R/Huge/item%06d.dat", $i);
    patchfile('patch2', $name, "patch2 $i\n") if $i % 3 == 0;
    patchfile('patch1', $name, "patch1 $i\n") if $i % 5 == 0;
}
my %infiles;
for my $f (@mainfiles) { (my $dir = $f->[0]) =~ s{/[^/]+$}{}; $infiles{$dir}++; }
my ($stackop) = sort { $infiles{$b} <=> $infiles{$a} || $a cmp $b } grep { $_ ne $op } keys %infiles;
patchfile('patch2', "$stackop/.wh..wh..opq", '');
for my $layer (qw(patch1 patch2)) {
    for my $i (0 .. $ncopyup - 1) {
        my $d = $dirs[pick(\@filedirs)];
        next if $d->{path} eq $op;
        my $dir = $d->{path} . (rnd() < 0.1 ? "/\u${layer}Added$i" : '');
        my $ext = filetype($d->{kind});
        my $rel = "$dir/${layer}new$i.$ext";
        patchfile($layer, $rel, content($rel, $layer, logsize(@{$sizes{$ext}}), $ext));
    }
}

# The stack as kernel overlayfs resolves it: a name hides the same name in the layers below,
# `.wh.NAME` hides NAME below, `.wh..wh..opq` every entry below, and a directory merges with the
# same directory below down to the first layer where the name is a whiteout or not a directory.
my @view;    # [path, f or d, the layer it comes from]
sub resolve {
    my ($rel, @layers) = @_;    # the layers, top first, in which $rel is a directory of the merge
    my %top;                    # name -> index of its layer, or -1 when whited out
    for my $k (0 .. $#layers) {
        my $dir = "$layerdir{$layers[$k]}/$rel";
        opendir(my $dh, $dir) or die "$dir: $!\n";
        for my $name (readdir $dh) {
            next if $name eq '.' || $name eq '..' || $name eq '.wh..wh..opq';
            if ($name =~ /^\.wh\.(.+)$/s) { $top{$1} = -1 unless exists $top{$1}; }
            else { $top{$name} = $k unless exists $top{$name}; }
        }
        closedir $dh;
        if (-e "$dir/.wh..wh..opq") { splice(@layers, $k + 1); last; }
    }
    for my $name (sort keys %top) {
        my $k = $top{$name};
        next if $k < 0;
        my $path = $rel eq '' ? $name : "$rel/$name";
        if (-l "$layerdir{$layers[$k]}/$path" || ! -d _) { push @view, [$path, 'f', $layers[$k]]; next; }
        push @view, [$path, 'd', $layers[$k]];
        my @below = ($layers[$k]);
        for my $layer (@layers[$k + 1 .. $#layers]) {
            last if -e "$layerdir{$layer}/$rel/.wh.$name";
            if (-d "$layerdir{$layer}/$path") { push @below, $layer; }
            elsif (-e _) { last; }
        }
        resolve($path, @below);
    }
}
resolve('', qw(sub patch1 patch2 main));
@view = sort { $a->[0] cmp $b->[0] } @view;
writefile("$out/stack-view.tsv", join('', map { join("\t", @$_) . "\n" } @view));

# Copy-up from the middle layers: files only in a patch, taken from each patch in turn.
my %pool = (patch1 => [], patch2 => []);
for my $v (@view) {
    push @{$pool{$v->[2]}}, $v->[0] if $v->[1] eq 'f' && $v->[2] =~ /^patch/ && ! -e "$out/main/$v->[0]";
}
my @stackcopyup;
for my $k (0 .. $ncopyup - 1) {
    my ($this, $other) = $k % 2 ? @pool{qw(patch2 patch1)} : @pool{qw(patch1 patch2)};
    my $from = @$this ? $this : $other;
    last unless @$from;
    push @stackcopyup, splice(@$from, rint(scalar @$from), 1);
}
writefile("$out/stack-copyup.list", join('', map { "$_\n" } @stackcopyup));
my @stackmissing = grep {
    my $p = $_;
    !grep { ! -d "$layerdir{$_}/$p" || -e "$layerdir{$_}/$p/.wh..wh..opq" } qw(sub patch1 patch2 main)
} map { $_->{path} } @dirs[@filedirs];

my %meta = (
    SCALE => $scale, DIRS => scalar(@dirs), FILES => $nfiles, NEW_FILES => $nnew,
    SHADOWED => scalar(@shadowed), WHITEOUTS => scalar(@whiteouts), HUGE => $nhuge,
    HUGE_MAIN => $hmain, HUGE_SUB => $hsub, HUGE_DIR => "$R/Huge", BIG => "$R/Movies/intro.mov",
    BIG_MIB => $bigmib, ENTRIES => $entries, COPYUP => scalar(@copyup),
    SHADOW_SAMPLE => $shadowed[0], STAT_FILE => $deep[0], WHITEOUT_SAMPLE => $whiteouts[0] // '',
    NEW_SAMPLE => $newsample, OPAQUE_DIR => $op, OPAQUE_HIDDEN => $opaquemain, OPAQUE_ENTRIES => 2,
    MISSING_DIR => $missingdirs[0] // $R, CREATE_FILES => atleast(50, 5000 * $scale),
    MISSING => atleast(200, 20000 * $scale), STATS => atleast(2000, 200000 * $scale),
    RANDREADS => atleast(200, 20000 * $scale),
    STACK_ENTRIES => scalar(@view), STACK_COPYUP => scalar(@stackcopyup), STACK_OPAQUE_DIR => $stackop,
    STACK_PATCH1_FILES => $stackcount{patch1}, STACK_PATCH2_FILES => $stackcount{patch2},
    STACK_WHITEOUTS => $stackcount{whiteouts}, STACK_MISSING_DIR => $stackmissing[0] // $R,
);
open(my $m, '>', "$out/meta.env") or die "meta: $!\n";
for my $k (sort keys %meta) {
    my $v = $meta{$k};
    $v =~ s/'/'\\''/g;
    print $m "$k='$v'\n";
}
close $m;
