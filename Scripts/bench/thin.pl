#!/usr/bin/perl
# SPDX-License-Identifier: Apache-2.0
# Writes layers.sh's thin shape (issue 49): a main bundle of about 5,000 files in 220
# directories 2-4 deep, N patches of 1-5 entries each anywhere in that tree (files replaced and
# added, whiteouts of files and directories, opaque directories, a file made a directory and a
# directory made a file), and the same view as one directory (what the patches over the main
# bundle show, which mounted alone is "the same view on two layers"). Fixed seed: the same data
# on every machine.
#   thin.pl ROOT N...
# Writes, once each: ROOT/main; for each N, ROOT/N/0 .. ROOT/N/(N-1) (the patches, the first
# the highest), ROOT/N.list (their paths, in that order), ROOT/N.view (the merged view),
# ROOT/N.names and ROOT/N.missing (2,000 existing files and 2,000 missing names of the view,
# in random order); and ROOT/N.reversed (the same patches, lowest first) with ROOT/N.stable
# (the files both orders show, for readers during swaps).
use strict;
use warnings;
use File::Path ();

my ($root, @counts) = @ARGV;
die "usage: thin.pl ROOT N...\n" unless defined $root && @counts;
mkdir $root;

# a deterministic generator (Perl's rand differs between builds): the C library's old LCG
my $state = 49;
sub rnd {  # an integer in [0, $_[0])
    $state = ($state * 1103515245 + 12345) % 2147483648;
    my $high = $state >> 8;
    $state = ($state * 1103515245 + 12345) % 2147483648;
    return (($high << 15) ^ ($state >> 16)) % $_[0];
}
sub pick { $_[rnd(scalar @_)] }
sub shuffled { my @a = @_; for (my $i = $#a; $i > 0; $i--) { my $j = rnd($i + 1); @a[$i, $j] = @a[$j, $i] } @a }
sub parent { my ($p) = @_; $p =~ s{/[^/]*$}{} ? $p : '' }
sub depth { scalar(() = $_[0] =~ m{/}g) + 1 }

# the main bundle's tree: 8 top directories, then directories added under random parents of
# depth 1-3 until there are 220
my @dirs = map { "d$_" } 0 .. 7;
while (@dirs < 220) {
    my $parent = pick(grep { depth($_) < 4 } @dirs);
    push @dirs, "$parent/s" . scalar(@dirs);
}
my %subdirs;
$subdirs{parent($_)}++ for @dirs;
my @leaves = grep { !$subdirs{$_} } @dirs;
my @deep = grep { depth($_) >= 2 } @dirs;
my @files;
for my $i (0 .. 4999) {
    my $dir = rnd(10) < 9 ? pick(@deep) : pick(@dirs);
    push @files, "$dir/f$i.dat";
}

sub write_file {
    my ($path, $text) = @_;
    open(my $fh, '>', $path) or die "thin.pl: $path: $!\n";
    print $fh $text;
    close $fh;
}
sub make_path { File::Path::make_path($_[0]) }

if (!-d "$root/main") {
    make_path("$root/main.tmp/$_") for @dirs;
    write_file("$root/main.tmp/$_", "main\n") for @files;
    rename "$root/main.tmp", "$root/main" or die "thin.pl: $!\n";
}

# one patch's entries: [kind, path, file inside (for directories)]; no two touch one path
sub patch_entries {  # mostly files replaced or added; directories emptied or replaced seldom
    my ($layer) = @_;
    my @entries;
    my @taken;
    my $wanted = 1 + rnd(5);
    while (@entries < $wanted) {
        my $roll = rnd(1000);
        my $entry;
        if ($roll < 580) { $entry = ['file', pick(@files)] }
        elsif ($roll < 800) { $entry = ['file', pick(@dirs) . "/n$layer-" . scalar(@entries) . ".dat"] }
        elsif ($roll < 880) { $entry = ['whiteout', pick(@files)] }
        elsif ($roll < 950) { $entry = ['newdir', pick(grep { depth($_) < 4 } @dirs) . "/nd$layer-" . scalar(@entries), "a.dat"] }
        elsif ($roll < 980) { $entry = ['filedir', pick(@files), "in$layer.dat"] }
        elsif ($roll < 987) { $entry = ['opaque', pick(@leaves), "o$layer.dat"] }
        elsif ($roll < 990) { $entry = ['whiteout', pick(@leaves)] }
        else { $entry = ['file', pick(@leaves)] }  # a directory made a file (1 in 100: mods seldom)
        my $path = $entry->[1];
        next if grep { $_ eq $path || index($_, "$path/") == 0 || index($path, "$_/") == 0 } @taken;
        push @taken, $path;
        push @entries, $entry;
    }
    return @entries;
}

# the view: path => 'd' or 'f', the main bundle's first, then each patch from the lowest up
sub remove_tree {
    my ($view, $path) = @_;
    my $was = delete $view->{$path} // '';
    return unless $was eq 'd';
    delete $view->{$_} for grep { index($_, "$path/") == 0 } keys %$view;
}
sub ensure_dirs {
    my ($view, $path) = @_;
    my $at = '';
    for my $name (split m{/}, $path) {
        $at = $at eq '' ? $name : "$at/$name";
        delete $view->{$at} if ($view->{$at} // '') eq 'f';
        $view->{$at} = 'd';
    }
}
sub apply {
    my ($view, $entry) = @_;
    my ($kind, $path, $inner) = @$entry;
    ensure_dirs($view, parent($path));
    if ($kind eq 'file') { remove_tree($view, $path); $view->{$path} = 'f' }
    elsif ($kind eq 'whiteout') { remove_tree($view, $path) }
    elsif ($kind eq 'opaque') { remove_tree($view, $path); $view->{$path} = 'd'; $view->{"$path/$inner"} = 'f' }
    else {  # newdir, filedir: a directory (over whatever was there but a directory) with a file
        delete $view->{$path} if ($view->{$path} // '') eq 'f';
        $view->{$path} = 'd';
        $view->{"$path/$inner"} = 'f';
    }
}
sub view_of {
    my ($patches) = @_;  # highest first
    my %view = map { $_ => 'd' } @dirs;
    $view{$_} = 'f' for @files;
    for my $entries (reverse @$patches) { apply(\%view, $_) for @$entries }
    return \%view;
}

for my $n (@counts) {
    next if -f "$root/$n.stable";
    my @patches = map { [patch_entries($_)] } 0 .. $n - 1;
    my $dir = "$root/$n";
    system('rm', '-rf', $dir, "$dir.view") == 0 or die;
    mkdir $dir;
    open(my $list, '>', "$root/$n.list") or die;
    for my $layer (0 .. $n - 1) {
        my $top = "$dir/$layer";
        mkdir $top;
        print $list "$top\n";
        for my $entry (@{$patches[$layer]}) {
            my ($kind, $path, $inner) = @$entry;
            my ($parent, $name) = $path =~ m{^(.*)/([^/]+)$};
            make_path("$top/$parent");
            if ($kind eq 'file') { write_file("$top/$path", "p$layer\n") }
            elsif ($kind eq 'whiteout') { write_file("$top/$parent/.wh.$name", '') }
            else {
                make_path("$top/$path");
                write_file("$top/$path/.wh..wh..opq", '') if $kind eq 'opaque';
                write_file("$top/$path/$inner", "p$layer\n");
            }
        }
    }
    close $list;
    open(my $reversed, '>', "$root/$n.reversed") or die;
    print $reversed "$dir/$_\n" for reverse 0 .. $n - 1;
    close $reversed;
    my $view = view_of(\@patches);
    for my $path (sort keys %$view) {
        if ($view->{$path} eq 'd') { make_path("$dir.view/$path") } else { make_path("$dir.view/" . parent($path)); write_file("$dir.view/$path", "view\n") }
    }
    mkdir "$dir.view";
    my @shown = sort grep { $view->{$_} eq 'f' } keys %$view;
    my @shown_dirs = sort grep { $view->{$_} eq 'd' } keys %$view;
    open(my $names, '>', "$root/$n.names") or die;
    my @picked = (shuffled(@shown))[0 .. (@shown < 2000 ? $#shown : 1999)];
    print $names "$_\n" for @picked;
    close $names;
    open(my $missing, '>', "$root/$n.missing") or die;
    for my $i (0 .. 1999) {
        # one in ten in a directory no layer has
        my $dir = pick(@shown_dirs);
        print $missing($i % 10 == 0 ? "$dir/q$i/q.dat\n" : "$dir/q$i.dat\n");
    }
    close $missing;
    my $other = view_of([reverse @patches]);
    open(my $stable, '>', "$root/$n.stable") or die;
    print $stable "$_\n" for grep { ($other->{$_} // '') eq 'f' } @shown;
    close $stable;
}
