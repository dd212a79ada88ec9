# SPDX-License-Identifier: Apache-2.0
"""Writes the seeds of the fuzz targets but assets-car's (Fuzz/Seeds/make.sh runs it)."""
import datetime, hashlib, json, os, plistlib, struct

def corpus(target, seeds):
    """Writes `seeds` as the target's corpus; the fuzzers' findings (`finding-*`) stay."""
    path = f"Fuzz/{target}/corpus"
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        if not name.startswith("finding-"):
            os.remove(f"{path}/{name}")
    for name, data in seeds.items():
        with open(f"{path}/{name}", "wb") as out:
            out.write(data)

# tar: entries as CraftedTar writes them (ustar headers, PAX records, GNU long names)
def octal(value, length):
    return (format(value, "o").rjust(length - 1, "0")).encode() + b"\0"

def header(name, kind, size=0, link="", mode=0o644, device=(0, 0), corrupt=False):
    h = bytearray(512)
    def put(data, offset, length):
        data = data.encode() if isinstance(data, str) else data
        h[offset:offset + min(len(data), length)] = data[:length]
    put(name, 0, 100); put(octal(mode, 8), 100, 8); put(octal(0, 8), 108, 8); put(octal(0, 8), 116, 8)
    put(octal(size, 12), 124, 12); put(octal(1600000000, 12), 136, 12); h[156] = ord(kind)
    put(link, 157, 100); put("ustar\0", 257, 6); put("00", 263, 2)
    put(octal(device[0], 8), 329, 8); put(octal(device[1], 8), 337, 8)
    h[148:156] = b" " * 8
    put(octal(sum(h) + (1 if corrupt else 0), 7) + b" ", 148, 8)
    return bytes(h)

def pad(data):
    return data + b"\0" * ((512 - len(data) % 512) % 512)

def entry(name, kind="0", content=b"", link="", mode=0o644, device=(0, 0), pax=(), corrupt=False):
    out = b""
    if pax:
        records = b""
        for key, value in pax:
            body = f" {key}={value}\n".encode()
            length = len(body) + 1
            while len(str(length)) + len(body) != length:
                length += 1
            records += str(length).encode() + body
        out += header("PaxHeader", "x", len(records)) + pad(records)
    return out + header(name, kind, len(content), link, mode, device, corrupt) + pad(content)

def long_name(name):
    data = name.encode() + b"\0"
    return header("././@LongLink", "L", len(data)) + pad(data)

end = b"\0" * 1024
deep = "/".join(["d" * 50] * 3)
corpus("tar", {
    "files-and-directories": entry("a/", "5", mode=0o755) + entry("a/b", content=b"fine") + entry("ok", content=b"x") + end,
    "symlink-and-hard-link": entry("f", content=b"x") + entry("s", "2", link="f") + entry("h", "1", link="f") + end,
    "dotdot": entry("a/", "5", mode=0o755) + entry("a/../../outside/owned", content=b"x") + end,
    "absolute": entry("/etc/owned", content=b"x") + end,
    "symlink-parent": entry("a", "2", link="../../../outside") + entry("a/owned", content=b"x") + end,
    "file-parent": entry("f", content=b"x") + entry("f/g", content=b"y") + end,
    "hard-link-out": entry("h", "1", link="../../secret") + entry("s", "2", link="/") + entry("g", "1", link="s/secret") + end,
    "pax-long-path": entry("x", pax=[("path", "d/" + "n" * 300)]) + end,
    "overlay-attribute": entry("d", "5", mode=0o755, pax=[("SCHILY.xattr.user.overlay.opaque", "y")]) + end,
    "bad-checksum": entry("fine", content=b"x") + entry("bad", content=b"y", corrupt=True) + end,
    "special": entry("dev", "3", mode=0o600, device=(1, 3)) + entry("pipe", "6", mode=0o600)
               + entry("suid", content=b"#!/bin/sh\n", mode=0o6755)
               + entry("noted", content=b"n", pax=[("SCHILY.xattr.user.note", "kept"), ("mtime", "1600000000.5")])
               + long_name(deep + "/gnu") + entry("ignored", content=b"gnu")
               + entry("ignored", content=b"pax", pax=[("path", deep + "/pax"), ("uid", "7"), ("size", "3")])
               + entry("linked", "1", link="noted") + end,
    "replaced": entry("x", "5", mode=0o755) + entry("x/y", content=b"1") + entry("x", content=b"2") + entry("./", "5") + end,
})

# oci: index.json, then blobs; @N is blob N's digest (Fuzz/oci/main.swift)
def documents(*parts):
    return "\n--\n".join(json.dumps(p, separators=(",", ":")) if not isinstance(p, str) else p for p in parts).encode()

layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + "a" * 64, "size": 10}
config = {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "b" * 64]}}
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "@2", "size": 10}, "layers": [layer]}
tagged = lambda digest, media: {"schemaVersion": 2, "manifests": [
    {"mediaType": media, "digest": digest, "size": 10, "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}
docker = dict(manifest, mediaType="application/vnd.docker.distribution.manifest.v2+json",
              layers=[dict(layer, mediaType="application/vnd.docker.image.rootfs.diff.tar.gzip")] * 2)
index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "c" * 64, "size": 1,
     "platform": {"architecture": "arm64", "os": "linux"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "@2", "size": 1,
     "platform": {"architecture": "amd64", "os": "linux"}}]}
corpus("oci", {
    "image": documents(tagged("@1", "application/vnd.oci.image.manifest.v1+json"), manifest, config),
    "docker": documents(tagged("@1", "application/vnd.docker.distribution.manifest.v2+json"), docker,
                        dict(config, rootfs={"type": "layers", "diff_ids": ["sha256:" + "b" * 64] * 2})),
    "index": documents(tagged("@1", "application/vnd.oci.image.index.v1+json"), index,
                       dict(manifest, config=dict(manifest["config"], digest="@3")), config),
    "escapes": documents('{"manifests":[{"digest":"@1","annotations":{"org.opencontainers.image.ref.name":"lat\\u0065st"}}]}',
                         '{"layers":[],"config":{"digest":"@2"}} ', '{"rootfs":{"diff_ids":[]},"x":[1.5e3,-0,true,false,null,"\\ud83d\\ude00"]}'),
})

# property lists: PropertyListTests' every kind of value, both formats, and the example bundle's
every = {"CFBundleDevelopmentRegion": "pt-BR", "Escaped": "<a & \"b\">'", "Unicode": "Espa\u00f1ol \U0001F600",
         "CFBundleLocalizations": ["en", 3, "", "fr", ["de"], "ja"], "True": True, "False": False, "Integer": -42,
         "Big": 2**40, "Huge": 2**64 - 1, "Real": 2.5, "Data": b"\x00\x01", "Date": datetime.datetime(2001, 1, 1),
         "Empty": "", "EmptyArray": [], "EmptyDict": {},
         "NSExtension": {"NSExtensionPointIdentifier": "com.apple.widget", "Deeper": {"List": [1, {"On": True}]}}}
small = {"CFBundleDevelopmentRegion": "fr", "CFBundleAllowMixedLocalizations": "YES", "CFBundleLocalizations": ["fr", "de"]}
example = open("Examples/Demo.app/Info.plist", "rb").read()
corpus("plist-xml", {
    "every-kind": plistlib.dumps(every, fmt=plistlib.FMT_XML, sort_keys=False),
    "small": plistlib.dumps(small, fmt=plistlib.FMT_XML),
    "example": example,
    "entities": b'<?xml version="1.0"?><!DOCTYPE plist><plist version="1.0"><dict><!-- c --><key>CFBundleDevelopmentRegion'
                b'</key><string>pt&amp;BR&#x41;&#66;&lt;</string><key>K</key><array/><key>R</key><real>-1e3</real>'
                b'<key>I</key><integer>0x10</integer><key>T</key><true/><key>D</key><data>AAE=</data></dict></plist>',
})
def shared_levels(levels):
    """A dictionary whose value is an array holding the next array twice, `levels` deep: a few
    hundred bytes that are 2^levels objects to a reader that reads a shared object per reference
    (FoundationEssentials' decoder, libplist 2.2), the body after `bplist00`."""
    objects = [bytes([0xD1, 1, 2]), b"\x51a"] + [bytes([0xA2, i + 1, i + 1]) for i in range(2, levels + 2)] + [b"\x09"]
    body, offsets = b"", []
    for o in objects:
        offsets.append(8 + len(body))
        body += o
    table = 8 + len(body)
    return body + bytes(offsets) + bytes(6) + bytes([1, 1]) + struct.pack(">QQQ", len(objects), 0, table)

corpus("plist-binary", {
    "shared-40": shared_levels(40),
    "every-kind": plistlib.dumps(every, fmt=plistlib.FMT_BINARY, sort_keys=False)[8:],
    "small": plistlib.dumps(small, fmt=plistlib.FMT_BINARY)[8:],
    "example": plistlib.dumps(plistlib.loads(example), fmt=plistlib.FMT_BINARY)[8:],
    "uid-and-set": bytes.fromhex("d101025f1019434642756e646c65446576656c6f706d656e74526567696f6e8105080b270000000000000101"
                                 "0000000000000003000000000000000000000000000000"),
})

# casefold: CaseFoldTests' names, alone and in pairs around 0xFF
names = ["Straße.TXT", "STRASSE.txt", "İstanbul", "ı", "ΣΑΣ", "σας", "é", "e\u0301", "Å", "A\u030a", "\u212b",
         "한국어", "\u1112\u1161\u11ab", "ǰ", "J\u030c", "ﬃ", "ꭰ", "Ꭰ", "α\u0345\u0301", "a\u0316\u0301", "a\u0301\u0316",
         "\U00010400", "ẞ", "K", "\u212a"]
seeds = {f"name-{i}": n.encode() for i, n in enumerate(names)}
pairs = [("Straße.TXT", "STRASSE.txt"), ("é", "e\u0301"), ("\u212b", "å"), ("한", "\u1112\u1161\u11ab"),
         ("a\u0316\u0301", "a\u0301\u0316"), ("ΣΑΣ", "σας")]
seeds.update({f"pair-{i}": a.encode() + b"\xff" + b.encode() for i, (a, b) in enumerate(pairs)})
seeds.update({"invalid": b"\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80abc", "cut": b"caf\xc3"})
corpus("casefold", seeds)

# control: a first byte choosing the file (0 .invalidate, 1 .layers, 2 .remount), then the write
corpus("control", {
    "invalidate-all": b"\x00\n",
    "invalidate-paths": b"\x00a/b\n  a/b/c \r\n./a//b/\n",
    "invalidate-odd": b"\x00../a\n/\n.wh.x\na/\x00b\n",
    "layers": b"\x01/p2\n/p1\n",
    "layers-none": b"\x01",
    "layers-refused": b"\x01/p1\n/p1\nrelative\n/mnt/x\n/p1/a\n",
    "remount": b"\x02ro,entry_timeout=5,attr_timeout=0.5, negative_timeout=0\n",
    "remount-refused": b"\x02rw,entry_timeout=-1,nan=1,attr_timeout=inf",
})
