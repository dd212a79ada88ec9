#!/usr/bin/perl
# The same loops as pbbench.c, for machines without a C compiler (slower per call, so the
# stat-heavy figures then include more of the caller's own time).
use strict;
use warnings;
use Errno qw(ENOENT);

my $cmd = shift // '';
if ($cmd eq 'statloop' && @ARGV == 2) {
    my ($path, $n) = @ARGV;
    for (1 .. $n) { stat($path) or die "pbbench: stat $path: $!\n"; }
} elsif ($cmd eq 'statfsloop' && @ARGV == 2) {
    my ($path, $n) = @ARGV;
    my $buffer = "\0" x 256;
    # statfs(2) is system call 137 on x86_64 (Perl has no statfs of its own)
    for (1 .. $n) { syscall(137, $path, $buffer) == 0 or die "pbbench: statfs $path: $!\n"; }
} elsif ($cmd eq 'missing' && @ARGV == 2) {
    my ($dir, $n) = @ARGV;
    for my $i (0 .. $n - 1) {
        my $p = "$dir/missing-$i.png";
        die "pbbench: found $p\n" if stat($p);
        die "pbbench: stat $p: $!\n" unless $! == ENOENT;
    }
} elsif ($cmd eq 'create' && @ARGV == 3) {
    my ($dir, $n, $size) = @ARGV;
    my $data = 'x' x $size;
    mkdir($dir, 0755) or die "pbbench: mkdir $dir: $!\n";
    for my $i (0 .. $n - 1) {
        my $p = sprintf('%s/file%05d.dat', $dir, $i);
        sysopen(my $fh, $p, 0101 | 0200) or die "pbbench: create $p: $!\n";    # O_WRONLY|O_CREAT|O_EXCL
        syswrite($fh, $data) == $size or die "pbbench: write $p: $!\n";
        close($fh) or die "pbbench: close $p: $!\n";
    }
} elsif ($cmd eq 'append' && @ARGV == 2) {
    my ($root, $list) = @ARGV;
    open(my $l, '<', $list) or die "pbbench: open $list: $!\n";
    while (my $line = <$l>) {
        chomp $line;
        next if $line eq '';
        sysopen(my $fh, "$root/$line", 01 | 02000) or die "pbbench: open $root/$line: $!\n";    # O_WRONLY|O_APPEND
        syswrite($fh, "appended by bench.sh\n") or die "pbbench: write $root/$line: $!\n";
        close($fh) or die "pbbench: close $root/$line: $!\n";
    }
} elsif ($cmd eq 'statlist' && @ARGV == 2) {
    my ($root, $list) = @ARGV;
    open(my $l, '<', $list) or die "pbbench: open $list: $!\n";
    while (my $line = <$l>) {
        chomp $line;
        next if $line eq '';
        lstat("$root/$line") or die "pbbench: lstat $root/$line: $!\n";
    }
} else {
    die "usage: pbbench statloop PATH N | statfsloop PATH N | missing DIR N | create DIR N SIZE | append ROOT LIST"
        . " | statlist ROOT LIST\n";
}
