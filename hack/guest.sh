#!/usr/bin/env bash
# Builds kstack's test guest, a small CirrOS-like Linux for the servers nova boots under QEMU
# (TCG is enough), from Debian bookworm packages only (no image registry, no internet), and
# caches it by a hash of all its inputs. Its whole root file system is the initramfs; the server's
# image is a whole disk that boots it: a master boot record and one FAT partition holding
# syslinux, the kernel and the initramfs (a real machine's disk, as CirrOS' is).
#
#   hack/guest.sh
#
# Output: the last line on stdout is the result directory, ~/.cache/kstack/guest/<hash>/, with
#   disk.raw      the server's image: a 32 MiB raw disk that boots by itself (BIOS, syslinux)
#   vmlinuz       the kernel of Debian's linux-image-*-cloud-amd64 (also on the disk)
#   initrd.img    the root file system, a gzip'd newc cpio (its /init: hack/guest/rootfs/init)
#   cmdline       the kernel command line syslinux gives it
#                 (console=ttyS0 last: the last console= is /dev/console, nova logs ttyS0)
#   packages.txt  the packages and versions the guest was built from
# When that directory exists already the script builds nothing and only prints it.
# Progress goes to stderr; the commands' output to ~/.cache/kstack/guest/build.log.
#
# Into the cloud:
#   openstack image create --disk-format raw --container-format bare --file disk.raw guest
#
# The guest: DHCP on every NIC (udhcpc), the metadata service's hostname, SSH keys and user-data
# script (#!), dropbear on port 22 with key login for root and cirros (cirros is uid 0, `sudo`
# is a shim; password gocubsgo also works for cirros), busybox, lsblk, blkid, mkfs.ext4 and a
# curl shim. It prints "kstack-guest: <step>" lines on the serial console; their formats are
# listed at the head of hack/guest/rootfs/init.
#
# Inputs: the packages of hack/guest/packages.txt at the versions the mirror's index names
# (fetched with apt-get download, with an apt state of the script's own under the cache; never
# installed), the modules of hack/guest/modules.txt, the files under hack/guest/rootfs/, the
# kernel command line in hack/guest/cmdline, hack/guest/initramfs.py and this script.
# Tools: apt-get, dpkg-deb, python3, gzip, flock; the disk's tools (mkfs.fat, mtools, syslinux)
# are run from their packages, unpacked with the guest's; root is not needed.
# Environment: KSTACK_CACHE (default ~/.cache/kstack), KSTACK_DEBIAN_MIRROR (default
# http://deb.debian.org/debian; security updates from its sibling debian-security),
# KSTACK_GUEST_INDEX_TTL (hours the package index is used before it is refreshed, default 24;
# an index that cannot be refreshed is used as it is), KSTACK_GUEST_KEEP (result directories
# kept, default 4).
set -o errexit -o nounset -o pipefail

usage() {
    local text
    text=$(sed -n '2,/^set -o/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//')
    if [ "${1:-0}" = 0 ]; then echo "$text"; else echo "$text" >&2; fi
    exit "${1:-0}"
}
while [ $# -gt 0 ]; do
    case $1 in
        -h|--help) usage 0 ;;
        *) echo "guest.sh: unknown argument '$1'" >&2; usage 2 ;;
    esac
done

SUITE=bookworm
ARCH=amd64
MIRROR=${KSTACK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${MIRROR%/debian}/debian-security
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
INDEX_TTL=${KSTACK_GUEST_INDEX_TTL:-24}
KEEP=${KSTACK_GUEST_KEEP:-4}
# CirrOS' well-known password, for the console and SSH; keys are what tempest uses.
PASSWORD=gocubsgo
SALT=kstackguest

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPT=$ROOT/hack/guest.sh
HERE=$ROOT/hack/guest
CACHE=${KSTACK_CACHE:-$HOME/.cache/kstack}
RESULTS=$CACHE/guest
APT=$RESULTS/apt
DEBS=$RESULTS/debs
BUILD_LOG=$RESULTS/build.log

log() { printf '%s guest.sh: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'guest.sh: error: %s\n' "$*" >&2; exit 1; }

for tool in apt-get apt-cache dpkg-deb python3 gzip flock sha256sum truncate; do
    command -v "$tool" >/dev/null || die "$tool is missing; install it first"
done
[ "$(uname -m)" = x86_64 ] || die "the guest is amd64 and its build runs its binaries (busybox, ld.so); run it on x86_64"
[ -f "$KEYRING" ] || die "$KEYRING is missing (apt-get install debian-archive-keyring)"
[[ $INDEX_TTL =~ ^[0-9]+$ ]] || die "KSTACK_GUEST_INDEX_TTL must be a number of hours"
[[ $KEEP =~ ^[1-9][0-9]*$ ]] || die "KSTACK_GUEST_KEEP must be a positive number"

mkdir -p "$RESULTS" "$DEBS" "$APT/lists/partial" "$APT/archives/partial" "$APT/cache" \
    "$APT/sources.list.d" "$APT/preferences.d"
# One run at a time per cache (the index, the .deb cache, the result directories).
exec 9>"$RESULTS/.lock"
flock -n 9 || { log "another guest.sh is running; waiting for it"; flock 9; }
# The build log keeps the runs of the last MiB or so.
if [ -f "$BUILD_LOG" ] && [ "$(stat -c %s "$BUILD_LOG")" -gt 1048576 ]; then
    mv -f "$BUILD_LOG" "$BUILD_LOG.old"
fi

# run DESCRIPTION CMD...: runs CMD with its output in the build log; on failure names the step
# and shows the end of the log. CMD runs in a subshell of its own, started in the background and
# waited for, so that errexit holds inside it.
run() {
    local what=$1 rc=0
    shift
    printf '\n=== %s %s\n' "$(date +%H:%M:%S)" "$what" >>"$BUILD_LOG"
    ( "$@" ) >>"$BUILD_LOG" 2>&1 &
    wait $! || rc=$?
    if [ "$rc" != 0 ]; then
        printf 'guest.sh: error: %s failed; log: %s\n--- last lines of the log ---\n' "$what" "$BUILD_LOG" >&2
        tail -n 20 "$BUILD_LOG" >&2
        exit 1
    fi
}

# --- the package index: an apt state of our own ------------------------------------------------
# Sources, preferences and status of the host's apt are left out (its pins and lists must not
# change what the guest is made of); its apt.conf.d (a proxy, say) applies.
APT_OPTS=(
    -o "Dir::State=$APT" -o "Dir::State::Lists=$APT/lists" -o "Dir::State::status=$APT/status"
    -o "Dir::Cache=$APT/cache" -o "Dir::Cache::Archives=$APT/archives"
    -o "Dir::Cache::pkgcache=$APT/cache/pkgcache.bin" -o "Dir::Cache::srcpkgcache="
    -o "Dir::Etc::SourceList=$APT/sources.list" -o "Dir::Etc::SourceParts=$APT/sources.list.d"
    -o "Dir::Etc::Preferences=$APT/preferences" -o "Dir::Etc::PreferencesParts=$APT/preferences.d"
    -o "APT::Architecture=$ARCH" -o "APT::Architectures::=$ARCH"
    -o Debug::NoLocking=true -o Acquire::Languages=none
)
[ "$(id -u)" = 0 ] && APT_OPTS+=(-o APT::Sandbox::User=root)
: >>"$APT/status"
SOURCES="deb [arch=$ARCH signed-by=$KEYRING target=Packages] $MIRROR $SUITE main
deb [arch=$ARCH signed-by=$KEYRING target=Packages] $MIRROR $SUITE-updates main
deb [arch=$ARCH signed-by=$KEYRING target=Packages] $SECURITY_MIRROR $SUITE-security main"
if [ "$(cat "$APT/sources.list" 2>/dev/null)" != "$SOURCES" ]; then
    echo "$SOURCES" >"$APT/sources.list"
    rm -f "$APT/updated"
fi

refresh_index() {
    log "refreshing the package index ($MIRROR $SUITE)"
    if ( apt-get "${APT_OPTS[@]}" update ) >>"$BUILD_LOG" 2>&1; then
        touch "$APT/updated"
    elif [ -f "$APT/updated" ]; then
        log "warning: could not refresh the package index (see $BUILD_LOG); using the one of $(date -r "$APT/updated" '+%F %R')"
    else
        printf 'guest.sh: error: apt-get update failed; log: %s\n' "$BUILD_LOG" >&2
        tail -n 20 "$BUILD_LOG" >&2
        exit 1
    fi
}
if [ ! -f "$APT/updated" ] || [ "$INDEX_TTL" = 0 ] ||
    [ -n "$(find "$APT/updated" -mmin +$((INDEX_TTL * 60)) 2>/dev/null)" ]; then
    refresh_index
    REFRESHED=1
else
    REFRESHED=0
fi

# --- the inputs and their hash -----------------------------------------------------------------
# candidates PACKAGE...: "<package> <version> <depends>" of each package's candidate version.
candidates() {
    apt-cache "${APT_OPTS[@]}" show --no-all-versions "$@" 2>/dev/null | awk '
        /^Package: / { pkg = $2 } /^Version: / { ver = $2 } /^Depends: / { dep = substr($0, 10) }
        /^$/ { if (pkg != "") print pkg, ver, dep; pkg = ver = dep = "" }
        END { if (pkg != "") print pkg, ver, dep }'
}
resolve() {
    RESOLVED=()
    local wanted pkg version kernel found
    mapfile -t wanted < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$HERE/packages.txt")
    found=$(candidates "${wanted[@]}")
    kernel=$(awk '$1 == "linux-image-cloud-amd64"' <<<"$found" | grep -o 'linux-image-[0-9][^ ,]*-cloud-amd64' | head -n 1)
    [ -n "$kernel" ] || die "linux-image-cloud-amd64 is not in the index of $MIRROR $SUITE, or depends on no linux-image-*-cloud-amd64"
    found+=$'\n'$(candidates "$kernel")
    for pkg in "${wanted[@]}"; do
        [ "$pkg" = linux-image-cloud-amd64 ] && pkg=$kernel
        version=$(awk -v p="$pkg" '$1 == p { print $2; exit }' <<<"$found")
        [ -n "$version" ] || die "package $pkg is not in the index of $MIRROR $SUITE"
        RESOLVED+=("$pkg=$version")
    done
}
resolve

input_hash() {
    {
        printf 'suite=%s arch=%s\n' "$SUITE" "$ARCH"
        sha256sum "$SCRIPT" | cut -d' ' -f1
        # The files under hack/guest/ with their content and whether they are executable.
        (cd "$HERE" && find . -name __pycache__ -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
        (cd "$HERE" && find . -name __pycache__ -prune -o -type f -perm -u+x -print | LC_ALL=C sort)
        printf '%s\n' "${RESOLVED[@]}"
    } | sha256sum | cut -c1-16
}
HASH=$(input_hash)
OUT=$RESULTS/$HASH
if [ -f "$OUT/cmdline" ] && [ -f "$OUT/initrd.img" ] && [ -f "$OUT/vmlinuz" ] && [ -f "$OUT/disk.raw" ] &&
    [ -f "$OUT/packages.txt" ]; then
    log "up to date ($(grep -m1 '^linux-image' "$OUT/packages.txt" 2>/dev/null || echo "$HASH"))"
    echo "$OUT"
    exit 0
fi

START=$SECONDS
WORK=$RESULTS/work-$HASH.$$
cleanup() {
    local rc=$?
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$RESULTS"/work-"$HASH".*
mkdir -p "$WORK/pkgs" "$WORK/root" "$WORK/out"
printf '\n##### %s build %s\n' "$(date '+%F %T')" "$HASH" >>"$BUILD_LOG"
log "building the guest $HASH"

# --- the packages ------------------------------------------------------------------------------
# deb_list: "<file name> <sha256>" of each package at its version, as apt would fetch it (apt
# lists only what is not in the current directory: ask from an empty one).
deb_list() {
    mkdir -p "$WORK/uris"
    (cd "$WORK/uris" && apt-get "${APT_OPTS[@]}" --print-uris download "${RESOLVED[@]}") |
        awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^SHA256:/) print $2, substr($i, 8) }'
}
fetch_debs() {
    local lines missing=() name sum pkg
    lines=$(deb_list)
    [ "$(echo "$lines" | wc -l)" = "${#RESOLVED[@]}" ] || { echo "apt-get --print-uris did not name every package"; return 1; }
    while read -r name sum; do
        if [ ! -f "$DEBS/$name" ] || [ "$(sha256sum "$DEBS/$name" | cut -d' ' -f1)" != "$sum" ]; then
            rm -f "$DEBS/$name"
            for pkg in "${RESOLVED[@]}"; do
                [ "${pkg%%=*}" = "${name%%_*}" ] && missing+=("$pkg")
            done
        fi
    done <<<"$lines"
    if [ ${#missing[@]} -gt 0 ]; then
        echo "downloading ${missing[*]}"
        (cd "$DEBS" && apt-get "${APT_OPTS[@]}" download "${missing[@]}")
        while read -r name sum; do
            [ "$(sha256sum "$DEBS/$name" | cut -d' ' -f1)" = "$sum" ] || { echo "$name: wrong SHA256 after download"; return 1; }
        done <<<"$lines"
    fi
    echo "$lines" >"$WORK/debs.list"
}
if ! ( fetch_debs ) >>"$BUILD_LOG" 2>&1; then
    # The index may name versions the mirror no longer has: refresh it and start over, once.
    [ "$REFRESHED" = 0 ] && [ -z "${KSTACK_GUEST_RETRY:-}" ] || {
        printf 'guest.sh: error: downloading the packages failed; log: %s\n' "$BUILD_LOG" >&2
        tail -n 20 "$BUILD_LOG" >&2
        exit 1
    }
    log "downloading failed with the index of $(date -r "$APT/updated" '+%F %R'); refreshing it"
    rm -f "$APT/updated"
    rm -rf "$WORK"
    trap - EXIT
    exec 9>&-
    KSTACK_GUEST_RETRY=1 exec bash "$SCRIPT"
fi
log "${#RESOLVED[@]} packages at hand: $(printf '%s ' "${RESOLVED[@]}" | grep -o 'linux-image-[^ ]*')"

unpack() {
    local name
    while read -r name _; do
        dpkg-deb -x "$DEBS/$name" "$WORK/pkgs"
    done <"$WORK/debs.list"
}
run "unpacking the packages" unpack
P=$WORK/pkgs
R=$WORK/root
KVERS=$(ls "$P/lib/modules")
[ "$(echo "$KVERS" | wc -l)" = 1 ] && [ -f "$P/boot/vmlinuz-$KVERS" ] || die "expected one kernel in the packages, found: $KVERS"
KVER=$KVERS

# --- the root file system ----------------------------------------------------------------------
# pkgfile NAME: the path (relative to the unpacked packages) of the program NAME.
pkgfile() {
    local d
    for d in bin sbin usr/bin usr/sbin; do
        [ -f "$P/$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    die "no program $1 in the packages"
}
# Dynamically linked programs taken from the packages, at their paths there.
PROGRAMS=(dropbear dropbearkey lsblk blkid mkfs mke2fs)
LIBDIR=lib/x86_64-linux-gnu
LDSO_NAME=ld-linux-x86-64.so.2

assemble() {
    cd "$R"
    mkdir -p bin sbin usr/bin usr/sbin "$LIBDIR" lib64 etc/dropbear dev proc sys run tmp root \
        home/cirros mnt media var/log var/lib var/tmp "lib/modules/$KVER"
    ln -s /run var/run
    # Our own files: executables 0755, the rest 0644, whatever the checkout's umask was.
    cp -R "$HERE/rootfs/." "$R/"
    find "$R" -type d -exec chmod 0755 {} +
    find "$R" -type f -perm -u+x -exec chmod 0755 {} +
    find "$R" -type f ! -perm -u+x -exec chmod 0644 {} +
    chmod 1777 tmp var/tmp
    chmod 0700 root
    # Accounts: root by key only ("*" is no password, "!" would lock the account for dropbear),
    # cirros (uid 0) by key or CirrOS' password. The hash is in /etc/passwd as well: the static
    # busybox's login cannot read /etc/shadow (no NSS in a static glibc); dropbear reads either.
    local hash
    hash=$("$P/bin/busybox" mkpasswd -m sha512 "$PASSWORD" "$SALT")
    printf 'root:*:::::::\ncirros:%s:::::::\nnobody:*:::::::\n' "$hash" >etc/shadow
    chmod 0600 etc/shadow
    sed -i "s|^cirros:x:|cirros:$hash:|" etc/passwd
    grep -qF "cirros:$hash:" etc/passwd || { echo "etc/passwd has no cirros:x: line"; return 1; }

    # busybox, and a link for each of its applets that nothing else provides; never a link named
    # busybox (a link loop). Its ash runs applets by name even without a link.
    cp "$P/bin/busybox" bin/busybox
    chmod 0755 bin/busybox
    local prog path lib
    for prog in "${PROGRAMS[@]}"; do
        path=$(pkgfile "$prog")
        cp "$P/$path" "$path"
        chmod 0755 "$path"
    done
    for prog in mkfs.ext2 mkfs.ext3 mkfs.ext4; do ln -s mke2fs "sbin/$prog"; done
    [ -f "$P/etc/mke2fs.conf" ] && cp "$P/etc/mke2fs.conf" etc/mke2fs.conf
    local applets=0
    while read -r path; do
        case $path in
            */busybox|busybox|linuxrc|"") continue ;;
        esac
        [ -e "$path" ] || [ -L "$path" ] && continue
        mkdir -p "$(dirname "$path")"
        ln -s /bin/busybox "$path"
        applets=$((applets + 1))
    done < <("$P/bin/busybox" --list-full)
    echo "busybox: $applets applet links"

    # The libraries the programs need, found as the guest's loader finds them, all from the
    # packages (a library the packages lack would otherwise come from the host's).
    local ldso
    ldso=$P/$LIBDIR/$LDSO_NAME
    [ -f "$ldso" ] && [ ! -L "$ldso" ] || { echo "no $LIBDIR/$LDSO_NAME in libc6"; return 1; }
    cp "$ldso" "$LIBDIR/$LDSO_NAME"
    ln -s "/$LIBDIR/$LDSO_NAME" "lib64/$LDSO_NAME"
    for prog in "${PROGRAMS[@]}"; do
        path=$(pkgfile "$prog")
        env -u LD_LIBRARY_PATH -u LD_PRELOAD "$ldso" --library-path "$P/$LIBDIR:$P/usr/$LIBDIR" \
            --list "$R/$path" >"$WORK/ldd"
        if grep -q 'not found' "$WORK/ldd"; then
            echo "$path: missing libraries:"; cat "$WORK/ldd"; return 1
        fi
        while read -r lib; do
            case $lib in
                "$P"/*) ;;
                *) echo "$path needs $lib, which is not in the packages (add its package)"; return 1 ;;
            esac
            [ -f "$LIBDIR/$(basename "$lib")" ] || cp -L "$lib" "$LIBDIR/$(basename "$lib")"
        done < <(awk '$2 == "=>" && $3 ~ /^\// && $1 !~ /ld-linux/ { print $3 }' "$WORK/ldd")
    done
    chmod 0644 "$LIBDIR"/*
    chmod 0755 "$LIBDIR/$LDSO_NAME"
    echo "libraries: $(cd "$LIBDIR" && echo *)"

    python3 "$HERE/initramfs.py" modules "$P/lib/modules/$KVER" "$HERE/modules.txt" "lib/modules/$KVER"
    chmod 0644 "lib/modules/$KVER"/*
}
run "assembling the root file system" assemble

# Programs and libraries start in the guest's own tree (its loader, its libraries only).
check_programs() {
    local prog path
    for prog in "${PROGRAMS[@]}"; do
        path=$(pkgfile "$prog")
        env -i "$R/$LIBDIR/$LDSO_NAME" --inhibit-cache --library-path "$R/$LIBDIR" --list "$R/$path" >"$WORK/ldd" ||
            { echo "$path does not load with the guest's libraries"; cat "$WORK/ldd"; return 1; }
        if awk -v root="$R/" '$2 == "=>" && $1 !~ /ld-linux/ && index($3, root) != 1 { bad = 1 } END { exit !bad }' "$WORK/ldd"; then
            echo "$path takes libraries from outside the guest:"; cat "$WORK/ldd"; return 1
        fi
    done
    "$R/bin/busybox" true
}
run "checking the programs load with the guest's libraries" check_programs

# --- the outputs -------------------------------------------------------------------------------
# The disk: DISK_MIB MiB, a master boot record (syslinux's boot code) and from 1 MiB on one active
# FAT16 partition with syslinux (its boot sector, ldlinux.sys, ldlinux.c32), its configuration,
# the kernel and the initramfs. The firmware runs the boot record, which runs the partition's boot
# sector, which loads syslinux, which boots the kernel with the initramfs and the command line.
DISK_MIB=32
make_disk() { # make_disk CMDLINE
    local fs=$WORK/fs.img start=2048 sectors id
    sectors=$(((DISK_MIB - 1) * 2048))
    id=${HASH:0:8}
    # mtools on an image file: no drive letters from a config of this host's, no geometry checks.
    export MTOOLSRC=/dev/null MTOOLS_SKIP_CHECK=1 PATH=$P/usr/bin:$PATH
    rm -f "$fs"
    truncate -s "$((sectors * 512))" "$fs"
    # -h: the sectors before the partition (its boot sector finds its files by them).
    "$P/$(pkgfile mkfs.fat)" -F 16 -n KSTACKGUEST -i "$id" -h "$start" "$fs"
    printf 'SERIAL 0 115200\nDEFAULT guest\nPROMPT 0\nTIMEOUT 0\nLABEL guest\n  KERNEL /vmlinuz\n  INITRD /initrd.img\n  APPEND %s\n' \
        "$1" >"$WORK/syslinux.cfg"
    mcopy -i "$fs" "$WORK/out/vmlinuz" "$WORK/out/initrd.img" "$WORK/syslinux.cfg" ::/
    syslinux --install "$fs"
    mdir -a -i "$fs" ::/ | grep -qi ldlinux || { echo "syslinux left no ldlinux.sys on the partition"; return 1; }
    python3 "$HERE/initramfs.py" mbr "$P/usr/lib/syslinux/mbr/mbr.bin" "$start" "$sectors" "$id" >"$WORK/out/disk.raw"
    cat "$fs" >>"$WORK/out/disk.raw"
    rm -f "$fs"
    [ "$(stat -c %s "$WORK/out/disk.raw")" = $((DISK_MIB * 1048576)) ] || { echo "disk.raw is not $DISK_MIB MiB"; return 1; }
}

make_outputs() {
    cp "$P/boot/vmlinuz-$KVER" "$WORK/out/vmlinuz"
    python3 "$HERE/initramfs.py" cpio "$R" --node dev/console:c:5:1:600 | gzip -9 -n >"$WORK/out/initrd.img"
    local cmdline
    cmdline=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/cmdline" | tr -s ' \t\n' '   ' | sed 's/ *$//')
    case ${cmdline##* } in
        console=ttyS0|console=ttyS0,*) ;;
        *) echo "hack/guest/cmdline must end with console=ttyS0: '$cmdline'"; return 1 ;;
    esac
    echo "$cmdline" >"$WORK/out/cmdline"
    make_disk "$cmdline"
    {
        echo "# kstack guest $HASH, built $(date -u '+%FT%TZ'); kernel $KVER"
        printf '%s\n' "${RESOLVED[@]}"
    } >"$WORK/out/packages.txt"
}
run "writing vmlinuz, initrd.img, cmdline and the disk" make_outputs

rm -rf "$OUT"
mv "$WORK/out" "$OUT"
log "built in $((SECONDS - START)) s: disk.raw $DISK_MIB MiB (vmlinuz $(du -k "$OUT/vmlinuz" | cut -f1) KiB, initrd.img $(du -k "$OUT/initrd.img" | cut -f1) KiB)"

# Older results beyond KSTACK_GUEST_KEEP, and the packages no longer used.
prune() {
    local dir name
    find "$RESULTS" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended -regex '.*/[0-9a-f]{16}' \
        -printf '%T@ %p\n' | sort -rn | tail -n +$((KEEP + 1)) | cut -d' ' -f2- |
        while read -r dir; do rm -rf "$dir"; done
    for name in "$DEBS"/*.deb; do
        [ -e "$name" ] || continue
        grep -q "^$(basename "$name") " "$WORK/debs.list" || rm -f "$name"
    done
}
prune
echo "$OUT"
