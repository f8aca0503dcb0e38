#!/usr/bin/env python3
"""Helpers of hack/guest.sh that the shell does badly.

  initramfs.py modules MODDIR LIST OUTDIR
      Copies the kernel modules named in LIST (lines "<phase> <module>", phase boot or late),
      each after the modules it depends on (the "depends=" of its .modinfo section), from the
      unpacked kernel package's MODDIR (/lib/modules/<version>) to OUTDIR as plain <name>.ko
      (a .ko.xz, .ko.gz or .ko.zst is decompressed: busybox insmod loads plain files), and
      writes OUTDIR/<phase>.list, the load order of each phase. Modules built into the kernel
      (modules.builtin) are left out. The package ships no modules.dep (depmod makes it on
      install), so the dependencies are read from the modules themselves.

  initramfs.py cpio ROOT [--node PATH:c|b:MAJOR:MINOR:MODE]...
      Writes to stdout an uncompressed newc cpio archive of the tree ROOT, every entry owned by
      root with a fixed mtime (a reproducible archive whoever runs the build), plus the device
      nodes given (an unprivileged build cannot mknod them in ROOT).

  initramfs.py mbr BOOTCODE START SECTORS DISKID
      Writes to stdout START sectors of 512 bytes: a master boot record with the boot code
      BOOTCODE (at most 440 bytes, syslinux's mbr.bin), the disk identifier DISKID (hex) and one
      active partition of type 0x06 (FAT16) from sector START for SECTORS sectors, then zeros up
      to the partition. The partition's file system goes after it.
"""
import gzip
import lzma
import os
import stat
import struct
import subprocess
import sys

MTIME = 0


def die(msg):
    sys.stderr.write("initramfs.py: error: %s\n" % msg)
    sys.exit(1)


# --- modules ---------------------------------------------------------------------------------

def read_module(path):
    if path.endswith(".ko.xz"):
        return lzma.decompress(open(path, "rb").read())
    if path.endswith(".ko.gz"):
        return gzip.decompress(open(path, "rb").read())
    if path.endswith(".ko.zst"):
        return subprocess.run(["zstd", "-dc", path], check=True, stdout=subprocess.PIPE).stdout
    return open(path, "rb").read()


def modinfo(data, name):
    """The key=value strings of an ELF64 little-endian module's .modinfo section."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        die("%s is not an ELF64 little-endian module" % name)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        base = shoff + i * shentsize
        sh_name, = struct.unpack_from("<I", data, base)
        sh_offset, sh_size = struct.unpack_from("<QQ", data, base + 0x18)
        return sh_name, sh_offset, sh_size

    _, str_off, str_size = section(shstrndx)
    names = data[str_off:str_off + str_size]
    for i in range(shnum):
        sh_name, off, size = section(i)
        if names[sh_name:names.index(b"\0", sh_name)] == b".modinfo":
            info = {}
            for item in data[off:off + size].split(b"\0"):
                if b"=" in item:
                    key, _, value = item.decode("utf-8", "replace").partition("=")
                    info.setdefault(key, value)
            return info
    die("%s has no .modinfo section" % name)


def norm(name):
    return name.replace("-", "_")


def cmd_modules(moddir, listfile, outdir):
    index = {}
    for top, _, files in os.walk(os.path.join(moddir, "kernel")):
        for f in files:
            for ext in (".ko", ".ko.xz", ".ko.gz", ".ko.zst"):
                if f.endswith(ext):
                    index[norm(f[: -len(ext)])] = os.path.join(top, f)
    builtin = set()
    builtin_file = os.path.join(moddir, "modules.builtin")
    if os.path.exists(builtin_file):
        for line in open(builtin_file):
            base = os.path.basename(line.strip())
            if base.endswith(".ko"):
                builtin.add(norm(base[:-3]))
    if not index:
        die("no modules under %s/kernel" % moddir)

    os.makedirs(outdir, exist_ok=True)
    placed = set()
    lists = {}
    notes = []

    def place(name, phase, chain):
        name = norm(name)
        if name in placed:
            return
        if name in chain:
            die("module dependency loop: %s" % " -> ".join(chain + [name]))
        if name not in index:
            if name in builtin:
                notes.append("%s is built into the kernel" % name)
                placed.add(name)
                return
            die("module %s is neither in %s nor built in" % (name, moddir))
        data = read_module(index[name])
        deps = [d for d in modinfo(data, name).get("depends", "").split(",") if d]
        for dep in deps:
            place(dep, phase, chain + [name])
        with open(os.path.join(outdir, name + ".ko"), "wb") as out:
            out.write(data)
        placed.add(name)
        lists.setdefault(phase, []).append(name)

    for lineno, line in enumerate(open(listfile), 1):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) != 2 or line[0] not in ("boot", "late"):
            die("%s:%d: expected '<boot|late> <module>'" % (listfile, lineno))
        place(line[1], line[0], [])
    for phase in ("boot", "late"):
        with open(os.path.join(outdir, phase + ".list"), "w") as out:
            out.writelines(name + "\n" for name in lists.get(phase, []))
    for note in notes:
        sys.stderr.write("initramfs.py: %s\n" % note)
    for phase in ("boot", "late"):
        sys.stderr.write("initramfs.py: %s modules: %s\n" % (phase, " ".join(lists.get(phase, [])) or "none"))


# --- cpio ------------------------------------------------------------------------------------

def cmd_cpio(root, nodes):
    out = sys.stdout.buffer
    ino = [0]

    def entry(name, mode, data=b"", rdev=(0, 0), nlink=1):
        ino[0] += 1
        encoded = name.encode() + b"\0"
        fields = (ino[0], mode, 0, 0, nlink, MTIME, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0)
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        out.write(header + encoded)
        out.write(b"\0" * (-(len(header) + len(encoded)) % 4))
        out.write(data)
        out.write(b"\0" * (-len(data) % 4))

    for top, dirs, files in os.walk(root):
        dirs.sort()
        rel_top = os.path.relpath(top, root)
        if rel_top != ".":
            st = os.lstat(top)
            entry(rel_top, stat.S_IFDIR | stat.S_IMODE(st.st_mode), nlink=2)
        # Symbolic links to directories are listed in dirs, not followed; archive them as links.
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(top, d))]):
            path = os.path.join(top, name)
            rel = os.path.normpath(os.path.join(rel_top, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                entry(rel, stat.S_IFLNK | 0o777, os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                entry(rel, stat.S_IFREG | stat.S_IMODE(st.st_mode), open(path, "rb").read())
            else:
                die("%s: only files, directories and symbolic links can be archived" % path)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    for spec in nodes:
        try:
            path, kind, major, minor, mode = spec.split(":")
            kind_bits = {"c": stat.S_IFCHR, "b": stat.S_IFBLK}[kind]
            entry(path.strip("/"), kind_bits | int(mode, 8), rdev=(int(major), int(minor)))
        except (ValueError, KeyError):
            die("bad --node %r (PATH:c|b:MAJOR:MINOR:MODE)" % spec)
    entry("TRAILER!!!", 0)
    out.flush()


def cmd_mbr(bootcode, start, sectors, diskid):
    with open(bootcode, "rb") as f:
        code = f.read()
    if len(code) > 440:
        die("%s is %d bytes; a master boot record holds at most 440 bytes of code" % (bootcode, len(code)))
    start, sectors, diskid = int(start), int(sectors), int(diskid, 16)
    if start < 1 or sectors < 1 or start + sectors > 0xFFFFFFFF:
        die("partition from sector %d for %d sectors does not fit a master boot record" % (start, sectors))
    # CHS fields past what CHS can address (0xFE 0xFF 0xFF): the firmware and the boot code read
    # the partition by LBA.
    chs = bytes([0xFE, 0xFF, 0xFF])
    entry = bytes([0x80]) + chs + bytes([0x06]) + chs + struct.pack("<II", start, sectors)
    mbr = code.ljust(440, b"\0") + struct.pack("<I", diskid) + b"\0\0" + entry + bytes(48) + b"\x55\xaa"
    assert len(mbr) == 512
    out = sys.stdout.buffer
    out.write(mbr)
    out.write(bytes(512 * (start - 1)))
    out.flush()


def main(argv):
    if argv[:1] == ["modules"] and len(argv) == 4:
        cmd_modules(*argv[1:])
    elif argv[:1] == ["cpio"] and len(argv) >= 2:
        nodes, rest = [], argv[2:]
        while rest:
            if rest[0] != "--node" or len(rest) < 2:
                die("usage: initramfs.py cpio ROOT [--node PATH:c|b:MAJOR:MINOR:MODE]...")
            nodes.append(rest[1])
            rest = rest[2:]
        cmd_cpio(argv[1], nodes)
    elif argv[:1] == ["mbr"] and len(argv) == 5:
        cmd_mbr(*argv[1:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
